"""Where a rollout's model calls are traced: a no-op unless the server traces the rollout.

The rollout clients (:class:`~osmosis_rollout.chat_client.RolloutChatClient`, the framework
integrations' lean endpoint) wrap each chat-completions call in :func:`model_call`. A rollout
server that exports traces (``OSMOSIS_ROLLOUT_OTLP_TRACES``, see
:mod:`osmosis_rollout.server.observability`) binds a span factory for the rollout's task with
:func:`trace_model_calls`; the task's children inherit it, every other caller (the plugin
in-process, user code outside a served rollout) pays one context-variable read. This module
knows nothing of OpenTelemetry.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from osmosis_rollout.redaction import redact_url

__all__ = ["SpanFactory", "model_call", "trace_model_calls"]

SpanFactory = Callable[[str, dict[str, Any]], AbstractContextManager[Any]]
"""Opens a span named by its first argument, with the given attributes, for a ``with`` block."""

_SPANS: contextvars.ContextVar[SpanFactory | None] = contextvars.ContextVar(
    "osmosis_rollout_model_call_spans", default=None
)


@contextlib.contextmanager
def model_call(url: str, *, stream: bool) -> Iterator[None]:
    """One model call to ``url`` (a span when the current rollout is traced)."""
    spans = _SPANS.get()
    if spans is None:
        yield
        return
    with spans("model call", {"url.full": redact_url(url), "osmosis.model_call.stream": stream}):
        yield


@contextlib.contextmanager
def trace_model_calls(spans: SpanFactory) -> Iterator[None]:
    """Within this block (and the tasks and threads it starts), model calls open ``spans``."""
    token = _SPANS.set(spans)
    try:
        yield
    finally:
        _SPANS.reset(token)
