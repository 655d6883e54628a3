"""How rollout traffic moves: bounded connection pools, call tracing, the result's wire form."""
