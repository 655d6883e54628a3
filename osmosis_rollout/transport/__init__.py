"""How rollout traffic moves: bounded connection pools, streamed chunks, call tracing, the
result's wire form."""
