"""Whether a rollout's model calls stream: one policy shared by every integration.

The production cluster's chat-completions endpoint is streaming-only, so streaming is the
default everywhere. Streaming through LiteLLM costs about twice the CPU of a plain
request, though, so where the endpoint also answers non-streaming requests (our own
policy endpoint does) a rollout can skip it. The samples are the same either way.

Resolution, first match wins:

1. an explicit ``streaming=True/False`` given to the model or client;
2. the environment variable ``OSMOSIS_ROLLOUT_STREAMING``: ``always`` or ``never``
   (``auto``, empty or unset falls through); set it on a rollout server process whose
   controller serves non-streaming replies;
3. the active rollout context's optional ``streaming`` attribute (``True``/``False``), a
   hint set by whoever built the context and knows its endpoint (the pytest plugin sets
   ``False`` when it serves the policy itself); ``RolloutContext`` does not declare it,
   so it is read with ``getattr``;
4. otherwise stream (what the production endpoint requires).
"""

from __future__ import annotations

import os
from typing import Any, Literal

from osmosis_rollout.context import RolloutContext, get_rollout_context
from osmosis_rollout.errors import ConfigError

STREAMING_ENV = "OSMOSIS_ROLLOUT_STREAMING"
"""Environment override: ``always``, ``never`` or ``auto`` (the default)."""

STREAMING_CONTEXT_ATTR = "streaming"
"""Optional ``RolloutContext`` attribute carrying the endpoint's streaming hint."""

StreamingMode = Literal["auto", "always", "never"]

_MODES: dict[str, bool | None] = {"auto": None, "": None, "always": True, "never": False}


def streaming_from_env() -> bool | None:
    """``True``/``False`` when ``OSMOSIS_ROLLOUT_STREAMING`` forces a mode, else ``None``."""
    raw = os.environ.get(STREAMING_ENV, "").strip().lower()
    if raw not in _MODES:
        raise ConfigError(
            f"{STREAMING_ENV}={os.environ[STREAMING_ENV]!r} is not a streaming mode; "
            "use one of: auto, always, never"
        )
    return _MODES[raw]


def resolve_streaming(
    explicit: bool | None = None, ctx: RolloutContext | Any | None = None
) -> bool:
    """Decide whether a call streams (see the module docstring for the order).

    ``ctx`` defaults to the active rollout context.
    """
    if explicit is not None:
        return bool(explicit)
    forced = streaming_from_env()
    if forced is not None:
        return forced
    if ctx is None:
        ctx = get_rollout_context()
    hint = getattr(ctx, STREAMING_CONTEXT_ATTR, None)
    if isinstance(hint, bool):
        return hint
    return True


__all__ = [
    "STREAMING_CONTEXT_ATTR",
    "STREAMING_ENV",
    "StreamingMode",
    "resolve_streaming",
    "streaming_from_env",
]
