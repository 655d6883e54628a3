"""OpenAI Agents SDK integration: the rollout's model, its session, and its sample.

Same names and behaviour as ``osmosis_ai.rollout.integrations.agents.openai_agents``::

    agent = OsmosisAgent(name="a", model=OsmosisRolloutModel(), tools=[multiply],
                         model_settings=ModelSettings(temperature=1.0))
    session = OsmosisMemorySession()          # inside AgentWorkflow.run()
    await Runner.run(agent, ctx.prompt, session=session)

- :class:`OsmosisRolloutModel` is a placeholder; :class:`OsmosisAgent` swaps it for an
  :class:`OsmosisLitellmModel` bound to the active rollout context (its chat-completions
  URL and key; LiteLLM model id ``litellm_proxy/osmosis-rollout``, so the wire carries
  ``model: "osmosis-rollout"``).
- :class:`OsmosisMemorySession` registers itself as the rollout's single sample source.
  The sample's ``messages`` are the session items (Responses input-item shape, what
  graders walk); ``trajectory_messages`` is the SDK's chat-completions conversion (for
  the ATIF trajectory), or ``None`` when that conversion fails.

Transport. The rollout's endpoint is called through
:mod:`osmosis_rollout.integrations._endpoint` (one pooled httpx client per event loop, a
cheap SSE parser) instead of LiteLLM's router, with the same request bytes; settings the
lean client does not cover go through LiteLLM unchanged.

Streaming. The official model streams every call. Ours streams unless told the endpoint
also answers plain requests (``streaming=False`` on the placeholder, the
``OSMOSIS_ROLLOUT_STREAMING`` environment variable, or the rollout context's hint: see
:mod:`osmosis_rollout.integrations.streaming`), which halves LiteLLM's CPU per call. Both
paths yield the same session items. A subclass's or a patched ``stream_response`` always
answers ``get_response``, as on the official model.

Needs the ``openai-agents`` extra; importing this module without it raises
:class:`~osmosis_rollout.errors.MissingExtraError` with the install command.
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

from osmosis_rollout._internal.imports import require_extra
from osmosis_rollout.context import RolloutContext, SampleSource, get_rollout_context
from osmosis_rollout.integrations._endpoint import on_lean_endpoint
from osmosis_rollout.integrations._litellm import (
    ROLLOUT_MODEL_ID,
    import_litellm,
    prepare_litellm_import,
)
from osmosis_rollout.integrations.streaming import resolve_streaming
from osmosis_rollout.types import RolloutSample

# The framework first (the likelier one to be missing), then LiteLLM through our helper,
# before ``agents.extensions.models.litellm_model`` imports it; the cost-map setting goes in
# before either.
prepare_litellm_import()
require_extra("agents", extra="openai-agents", package="openai-agents")
import_litellm(extra="openai-agents")

from agents import Agent  # noqa: E402
from agents.extensions.models.litellm_model import LitellmModel  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.memory.session import SessionABC  # noqa: E402
from agents.models.chatcmpl_converter import Converter  # noqa: E402
from agents.usage import Usage  # noqa: E402

logger = logging.getLogger(__name__)

_PLACEHOLDER_MESSAGE = (
    "OsmosisRolloutModel is a placeholder and cannot be called: wrap your agent with "
    "OsmosisAgent(model=OsmosisRolloutModel(), ...) so the model is bound to the active "
    "RolloutContext"
)


class OsmosisMemorySession(SessionABC):  # type: ignore[misc]
    """In-memory OpenAI Agents session that is also the rollout's sample source.

    Constructed inside a rollout context, it registers itself there (a second session in
    the same rollout raises ``ValueError``). Used inside a rollout context it did not
    register with, ``get_items``/``add_items`` raise ``RuntimeError``. Outside any rollout
    context it is a plain in-memory session.
    """

    def __init__(self, session_id: str | None = None) -> None:
        self.session_id: str = session_id or uuid.uuid4().hex
        self.items: list[Any] = []
        self._context: RolloutContext | None = None
        ctx = get_rollout_context()
        if ctx is not None:
            ctx.set_sample_source(SessionSampleSource(self))
            self._context = ctx

    def _check_context(self) -> None:
        ctx = get_rollout_context()
        if ctx is not None and ctx is not self._context:
            raise RuntimeError(
                "OsmosisMemorySession was used inside a RolloutContext it was not registered "
                "with: construct the session inside AgentWorkflow.run(), once per rollout"
            )

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The stored items, or the last ``limit`` of them."""
        self._check_context()
        if limit is None:
            return list(self.items)
        return list(self.items[-limit:]) if limit > 0 else []

    async def add_items(self, items: list[Any]) -> None:
        """Append items the runner persisted."""
        self._check_context()
        self.items.extend(items)

    async def pop_item(self) -> Any | None:
        """Remove and return the newest item (``None`` when empty)."""
        return self.items.pop() if self.items else None

    async def clear_session(self) -> None:
        """Forget every item."""
        self.items.clear()


def to_chat_messages(items: Sequence[Any], *, log_errors: bool = True) -> list[Any] | None:
    """Session items as chat-completions messages (the SDK converter), ``None`` on failure."""
    try:
        converted = Converter.items_to_messages(
            cast(Any, list(items)), preserve_tool_output_all_content=True
        )
    except Exception:
        if log_errors:
            # The official SDK's wording: log lines people grep for read the same.
            logger.warning(
                "Failed to convert OpenAI Agents messages for trajectory persistence",
                exc_info=True,
            )
        return None
    return [dict(message) for message in converted]


def _model_turns(items: Sequence[Any]) -> int | None:
    """Count model responses: runs of output items between input items (None if unknown)."""
    turns, in_output = 0, False
    for item in items:
        if not isinstance(item, Mapping):
            return None
        kind = item.get("type")
        if kind in (None, "message"):
            output = item.get("role") == "assistant"
        elif isinstance(kind, str) and kind.endswith("_call_output"):
            output = False
        elif kind == "reasoning" or (isinstance(kind, str) and kind.endswith("_call")):
            output = True
        else:
            return None
        if output and not in_output:
            turns += 1
        in_output = output
    return turns


class SessionSampleSource(SampleSource):
    """The rollout's sample from an OpenAI Agents session's persisted items."""

    def __init__(self, session: Any) -> None:
        self.session = session

    async def get_sample(self) -> RolloutSample:
        """Session items as ``messages``; their chat conversion as ``trajectory_messages``."""
        items = await self.session.get_items()
        return RolloutSample(messages=items, trajectory_messages=to_chat_messages(items))

    async def get_preview(self, max_messages: int) -> RolloutSample | None:
        """An isolated copy of the last ``max_messages`` items (for live previews)."""
        if max_messages <= 0:
            return None
        recent = await self.session.get_items(limit=max_messages + 1)
        items = copy.deepcopy(recent[-max_messages:])
        all_items = getattr(self.session, "items", None)
        return RolloutSample(
            messages=items,
            trajectory_messages=to_chat_messages(items, log_errors=False),
            extra_fields={
                "_preview_truncated": len(recent) > max_messages,
                "_preview_turn": _model_turns(all_items) if all_items is not None else None,
            },
        )


class OsmosisRolloutModel(LitellmModel):  # type: ignore[misc]
    """Placeholder policy model; :class:`OsmosisAgent` replaces it with the rollout's model.

    Keyword arguments are kept for :class:`OsmosisLitellmModel` (``streaming`` included).
    Sampling options belong in ``ModelSettings``. Calling it directly raises
    ``NotImplementedError``.
    """

    def __init__(self, **litellm_kwargs: Any) -> None:
        # LitellmModel.__init__ is skipped on purpose: the placeholder has no endpoint.
        self.litellm_kwargs: dict[str, Any] = litellm_kwargs
        self.model = ROLLOUT_MODEL_ID

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        """Always raises ``NotImplementedError``: the placeholder has no endpoint."""
        raise NotImplementedError(_PLACEHOLDER_MESSAGE)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """Always raises ``NotImplementedError``: the placeholder has no endpoint."""
        raise NotImplementedError(_PLACEHOLDER_MESSAGE)
        yield  # pragma: no cover  (makes this an async generator, like the real one)


def _require_sample_source() -> None:
    ctx = get_rollout_context()
    if ctx is None or ctx.sample_source is None:
        raise RuntimeError(
            "OsmosisLitellmModel was called without an OsmosisMemorySession registered with "
            "the rollout: pass session=OsmosisMemorySession() to Runner.run() so the "
            "conversation is recorded for the grader"
        )


_lean_fetch_response = on_lean_endpoint(LitellmModel._fetch_response)


class OsmosisLitellmModel(LitellmModel):  # type: ignore[misc]
    """LiteLLM model bound to the active rollout's chat-completions endpoint and key.

    Construct inside a rollout context (``RuntimeError`` otherwise). A request refuses to go
    out unless a sample source (an :class:`OsmosisMemorySession`) is registered, checked
    where the request is built, as the official SDK does. ``get_response`` aggregates the
    events of ``self.stream_response`` (so a subclass's or a patched ``stream_response`` is
    what answers); with ``streaming=False`` (``None``: the shared policy) and the shipped
    ``stream_response``, it sends one plain request instead, with the same result.
    """

    def __init__(self, *, streaming: bool | None = None, **litellm_kwargs: Any) -> None:
        ctx = get_rollout_context()
        if ctx is None:
            raise RuntimeError(
                "OsmosisLitellmModel needs an active RolloutContext: construct the agent "
                "inside AgentWorkflow.run(), where the backend has entered the context"
            )
        super().__init__(
            model=ROLLOUT_MODEL_ID,
            base_url=ctx.chat_completions_url,
            api_key=ctx.api_key,
            **litellm_kwargs,
        )
        self.streaming: bool = resolve_streaming(streaming, ctx)

    async def _fetch_response(self, *args: Any, **kwargs: Any) -> Any:
        # Every real request, streamed or not, is built here: the session check goes first.
        _require_sample_source()
        # The SDK's request building, sent by the lean endpoint client (see on_lean_endpoint).
        return await _lean_fetch_response(self, *args, **kwargs)

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        """One model reply: ``self.stream_response``'s events aggregated (see the class)."""
        if not self.streaming and _streams_as_shipped(self):
            return await super().get_response(*args, **kwargs)
        output: list[Any] = []
        usage = Usage()
        async for event in self.stream_response(*args, **kwargs):
            if event.type != "response.completed":
                continue
            final = event.response
            output = list(final.output)
            if final.usage:
                usage = Usage(
                    requests=1,
                    input_tokens=final.usage.input_tokens,
                    output_tokens=final.usage.output_tokens,
                    total_tokens=final.usage.total_tokens,
                    input_tokens_details=final.usage.input_tokens_details,
                    output_tokens_details=final.usage.output_tokens_details,
                )
        return ModelResponse(output=output, usage=usage, response_id=None)


_SHIPPED_STREAM_RESPONSE = OsmosisLitellmModel.stream_response


def _streams_as_shipped(model: OsmosisLitellmModel) -> bool:
    """True unless a subclass, a patch of the class or of ``model`` replaced stream_response."""
    return getattr(model.stream_response, "__func__", None) is _SHIPPED_STREAM_RESPONSE


class OsmosisAgent(Agent):  # type: ignore[misc]
    """``agents.Agent`` that binds an :class:`OsmosisRolloutModel` placeholder to the rollout.

    A placeholder ``model`` becomes an :class:`OsmosisLitellmModel` at construction (so
    construct it inside ``AgentWorkflow.run()``); any other model passes through.
    """

    def __init__(self, *args: Any, model: Any = None, **kwargs: Any) -> None:
        if isinstance(model, OsmosisRolloutModel):
            model = OsmosisLitellmModel(**model.litellm_kwargs)
        super().__init__(*args, model=model, **kwargs)


__all__ = [
    "OsmosisAgent",
    "OsmosisLitellmModel",
    "OsmosisMemorySession",
    "OsmosisRolloutModel",
    "SessionSampleSource",
    "to_chat_messages",
]
