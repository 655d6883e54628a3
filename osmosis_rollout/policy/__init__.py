"""Policies: the model behind the rollout-scoped chat-completions endpoint.

Three kinds behind one interface (``async def complete(ChatRequest) -> ChatReply``):

- scripted (:func:`as_policy`, :class:`ScriptedPolicy`): a callable or a list of replies;
- a real model through LiteLLM (:class:`LiteLLMPolicy`);
- record and replay of any policy into JSON cassettes (:class:`RecordingPolicy`).

The HTTP endpoint serving them is :class:`osmosis_rollout.controller.PolicyServer`.
Nothing here imports litellm or fastapi at import time.
"""

from osmosis_rollout.errors import CassetteMissError, PolicyError
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

__all__ = [
    "CallRecord",
    "CassetteMissError",
    "ChatReply",
    "ChatRequest",
    "Cost",
    "Faults",
    "LiteLLMPolicy",
    "Policy",
    "PolicyError",
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
