"""How rollout traffic moves: in-process routes, sharded connection pools, call tracing, the result's wire form."""
