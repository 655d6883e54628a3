"""Policies: the model behind the rollout-scoped chat-completions endpoint.

Three kinds behind one interface (``async def complete(ChatRequest) -> ChatReply``):

- scripted (:func:`as_policy`, :class:`ScriptedPolicy`): a callable or a list of replies;
- a real model (:class:`LiteLLMPolicy`): through LiteLLM, or through the ``openai`` SDK for
  an OpenAI-compatible server of your own (:mod:`~osmosis_rollout.policy.openai_compatible`);
- record and replay of any policy into JSON cassettes (:class:`RecordingPolicy`).

The HTTP endpoint serving them is :class:`PolicyServer` (``endpoint.py``; also importable
from ``osmosis_rollout.controller``). Nothing here imports litellm or fastapi at import
time: ``PolicyServer`` is loaded when first accessed.
"""

from typing import TYPE_CHECKING, Any

from osmosis_rollout.errors import CassetteFileError, CassetteMissError, PolicyError
from osmosis_rollout.policy.accounting import CallRecord, Cost, RolloutCallLog, TokenPrices
from osmosis_rollout.policy.faults import Faults
from osmosis_rollout.policy.litellm_policy import LiteLLMPolicy
from osmosis_rollout.policy.recording import RecordingPolicy, RecordMode, normalise_request
from osmosis_rollout.policy.scripted import ScriptedPolicy, as_policy
from osmosis_rollout.policy.types import (
    ChatReply,
    ChatRequest,
    Policy,
    Text,
    ToolCall,
    Usage,
    coerce_reply,
    estimate_usage,
)

if TYPE_CHECKING:
    from osmosis_rollout.policy.endpoint import PolicyServer

__all__ = [
    "CallRecord",
    "CassetteFileError",
    "CassetteMissError",
    "ChatReply",
    "ChatRequest",
    "Cost",
    "Faults",
    "LiteLLMPolicy",
    "Policy",
    "PolicyError",
    "PolicyServer",
    "RecordMode",
    "RecordingPolicy",
    "RolloutCallLog",
    "ScriptedPolicy",
    "Text",
    "TokenPrices",
    "ToolCall",
    "Usage",
    "as_policy",
    "coerce_reply",
    "estimate_usage",
    "normalise_request",
]


def __getattr__(name: str) -> Any:
    # Lazy: the endpoint needs FastAPI and uvicorn (the ``server`` extra).
    if name == "PolicyServer":
        from osmosis_rollout.policy.endpoint import PolicyServer

        return PolicyServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
