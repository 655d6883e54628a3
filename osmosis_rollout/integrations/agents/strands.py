"""Strands Agents integration: the rollout's model and the agent that is its sample source.

Same names and behaviour as ``osmosis_ai.rollout.integrations.agents.strands``::

    agent = OsmosisStrandsAgent(model=OsmosisRolloutModel(params={"temperature": 1.0}),
                                tools=[multiply], system_prompt="...")
    agent(ctx.prompt[-1]["content"])          # or: await agent.invoke_async(...)

- :class:`OsmosisRolloutModel` is a placeholder carrying LiteLLM model config
  (``params={...}``, ``stream``, ...). :class:`OsmosisStrandsAgent` replaces it with a
  Strands ``LiteLLMModel`` bound to the active rollout context (``client_args`` with its
  chat-completions URL and key; model id ``litellm_proxy/osmosis-rollout``) and registers
  itself as the rollout's single sample source (a second one raises ``ValueError``).
- String-content ``messages`` are rewritten to Strands content blocks
  (``{"role", "content": [{"text": ...}]}``; their other keys are dropped).
- The sample's ``messages`` are ``agent.messages`` (Strands blocks, what graders walk);
  ``trajectory_messages`` are LiteLLM-formatted chat messages, or ``None`` when that
  formatting fails.

Streaming follows :mod:`osmosis_rollout.integrations.streaming` unless the placeholder is
given ``stream`` (or ``params["stream"]``) or ``streaming`` explicitly.

The bound model is Strands' ``LiteLLMModel`` whose calls to the rollout's endpoint go through
:mod:`osmosis_rollout.integrations._endpoint` (pooled httpx, cheap SSE parsing) with the same
request bytes; settings that client does not cover go through LiteLLM unchanged.

Every call carries LiteLLM's ``_skip_mcp_handler`` flag where the installed LiteLLM reads it
(see :mod:`osmosis_rollout.integrations._litellm`): rollout tools are plain functions, and
some LiteLLM releases otherwise failed every call with tools on an ``mcp`` import.

Needs the ``strands`` extra; importing this module without it raises
:class:`~osmosis_rollout.errors.MissingExtraError` with the install command.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

from osmosis_rollout._internal.imports import require_extra
from osmosis_rollout.context import RolloutContext, SampleSource, get_rollout_context
from osmosis_rollout.integrations._endpoint import lean_methods
from osmosis_rollout.integrations._litellm import (
    ROLLOUT_MODEL_ID,
    import_litellm,
    prepare_litellm_import,
    skip_mcp_handler_args,
)
from osmosis_rollout.integrations.streaming import resolve_streaming
from osmosis_rollout.types import RolloutSample

# The framework first (the likelier one to be missing), then LiteLLM through our helper,
# before ``strands.models.litellm`` imports it; the cost-map setting goes in before either.
prepare_litellm_import()
require_extra("strands", extra="strands", package="strands-agents")
import_litellm(extra="strands")

from strands import Agent as StrandsAgent  # noqa: E402
from strands.models.litellm import LiteLLMModel  # noqa: E402

logger = logging.getLogger(__name__)

#: Strands 1.45 added the ``stream`` setting; older releases read ``params["stream"]`` instead.
_STREAM_IS_A_SETTING = "stream" in getattr(
    getattr(LiteLLMModel, "LiteLLMConfig", None), "__annotations__", {}
)


#: Strands' ``LiteLLMModel`` with its ``litellm.acompletion`` calls answered by the lean
#: rollout-endpoint client (same request bytes; see ``osmosis_rollout.integrations._endpoint``).
LeanLiteLLMModel: type[Any] = type(
    "LeanLiteLLMModel",
    (LiteLLMModel,),
    {
        "__module__": __name__,
        "__doc__": "Strands LiteLLMModel whose rollout-endpoint calls skip LiteLLM's router.",
        **lean_methods(LiteLLMModel),
    },
)


def to_content_block_messages(
    messages: Sequence[Mapping[str, Any]],
) -> list[dict[str, Any]]:
    """Rewrite string-content messages as Strands text blocks; others pass through."""
    converted: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            converted.append({"role": message["role"], "content": [{"text": content}]})
        else:
            converted.append(cast(dict[str, Any], message))
    return converted


def to_chat_messages(
    messages: Sequence[Mapping[str, Any]], *, log_errors: bool = True
) -> list[Any] | None:
    """Strands messages as LiteLLM chat messages (tool results as role ``tool``), or None."""
    try:
        return list(LiteLLMModel.format_request_messages(cast(Any, list(messages))))
    except Exception:
        if log_errors:
            # The official SDK's wording: log lines people grep for read the same.
            logger.warning(
                "Failed to convert Strands messages for trajectory persistence", exc_info=True
            )
        return None


class StrandsAgentSampleSource(SampleSource):
    """The rollout's sample from a Strands agent's ``messages``."""

    def __init__(self, agent: Any) -> None:
        self.agent = agent

    async def get_sample(self) -> RolloutSample:
        """``agent.messages`` as ``messages``; their chat formatting as trajectory."""
        messages = list(self.agent.messages)
        return RolloutSample(messages=messages, trajectory_messages=to_chat_messages(messages))

    async def get_preview(self, max_messages: int) -> RolloutSample | None:
        """An isolated copy of the last ``max_messages`` messages (for live previews)."""
        if max_messages <= 0:
            return None
        everything = list(self.agent.messages)
        messages = copy.deepcopy(everything[-max_messages:])
        manager = getattr(self.agent, "conversation_manager", None)
        history_removed = getattr(manager, "removed_message_count", 0) > 0
        return RolloutSample(
            messages=messages,
            trajectory_messages=to_chat_messages(messages, log_errors=False),
            extra_fields={
                "_preview_truncated": history_removed or len(everything) > max_messages,
                "_preview_turn": None
                if history_removed
                else sum(message.get("role") == "assistant" for message in everything),
            },
        )


class OsmosisRolloutModel(LiteLLMModel):  # type: ignore[misc]
    """Placeholder policy model carrying LiteLLM model config (``params={...}`` etc.).

    :class:`OsmosisStrandsAgent` replaces it with a model bound to the rollout; it has no
    endpoint of its own, so calling it directly raises ``NotImplementedError``.
    ``streaming`` (``None``: the shared policy) chooses streaming unless ``stream`` is set.
    """

    def __init__(self, *, streaming: bool | None = None, **litellm_kwargs: Any) -> None:
        # LiteLLMModel.__init__ is skipped on purpose: the placeholder has no endpoint.
        self.litellm_kwargs: dict[str, Any] = litellm_kwargs
        self.streaming = streaming
        self.client_args: dict[str, Any] = {}
        self.config: dict[str, Any] = {"model_id": ROLLOUT_MODEL_ID, **litellm_kwargs}

    async def stream(self, *args: Any, **kwargs: Any) -> Any:
        """Always raises ``NotImplementedError``: the placeholder has no endpoint."""
        raise NotImplementedError(
            "OsmosisRolloutModel is a placeholder and cannot be called: pass it to "
            "OsmosisStrandsAgent(model=OsmosisRolloutModel(...)) so it is bound to the "
            "active RolloutContext"
        )
        yield  # pragma: no cover  (makes this an async generator, like the real one)

    def bind(self) -> tuple[Any, RolloutContext]:
        """A Strands ``LiteLLMModel`` on the active rollout's endpoint, and that context.

        Raises ``RuntimeError`` outside a rollout context.
        """
        ctx = get_rollout_context()
        if ctx is None:
            raise RuntimeError(
                "OsmosisRolloutModel needs an active RolloutContext: construct the "
                "OsmosisStrandsAgent inside AgentWorkflow.run(), where the backend has "
                "entered the context"
            )
        config = dict(self.litellm_kwargs)
        params = config.get("params")
        client_args = {
            **skip_mcp_handler_args(),
            **dict(config.pop("client_args", None) or {}),
            "api_base": ctx.chat_completions_url,
            "api_key": ctx.api_key,
        }
        if "stream" not in config and not (isinstance(params, Mapping) and "stream" in params):
            stream = resolve_streaming(self.streaming, ctx)
            if _STREAM_IS_A_SETTING:
                config["stream"] = stream
            else:
                config["params"] = {**(params or {}), "stream": stream}
        config.setdefault("model_id", ROLLOUT_MODEL_ID)
        return LeanLiteLLMModel(client_args=client_args, **config), ctx


class OsmosisStrandsAgent(StrandsAgent):  # type: ignore[misc]
    """``strands.Agent`` that binds an :class:`OsmosisRolloutModel` to the active rollout.

    With the placeholder it needs an active rollout context (``RuntimeError`` otherwise)
    and registers itself as the rollout's sample source; any other model passes through
    and registers nothing.
    """

    def __init__(
        self,
        *args: Any,
        messages: list[dict[str, Any]] | None = None,
        model: Any = None,
        **kwargs: Any,
    ) -> None:
        if messages:
            messages = to_content_block_messages(messages)
        ctx: RolloutContext | None = None
        if isinstance(model, OsmosisRolloutModel):
            model, ctx = model.bind()
        super().__init__(*args, model=model, messages=messages, **kwargs)
        if ctx is not None:
            ctx.set_sample_source(StrandsAgentSampleSource(self))


__all__ = [
    "OsmosisRolloutModel",
    "OsmosisStrandsAgent",
    "StrandsAgentSampleSource",
    "to_chat_messages",
    "to_content_block_messages",
]
