"""Agent-framework integrations and the settings they share.

Import each framework's module explicitly
(``osmosis_rollout.integrations.agents.openai_agents``,
``osmosis_rollout.integrations.agents.strands``) so that one framework never becomes a
dependency of another; this package itself imports none of them.
"""

from osmosis_rollout.integrations.streaming import (
    STREAMING_CONTEXT_ATTR,
    STREAMING_ENV,
    StreamingMode,
    resolve_streaming,
)

__all__ = ["STREAMING_CONTEXT_ATTR", "STREAMING_ENV", "StreamingMode", "resolve_streaming"]
