"""Wire models of the remote-rollout protocol (admission, long-poll results, cancel)."""

from __future__ import annotations

import math
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from osmosis_rollout._internal.ids import ensure_rollout_id
from osmosis_rollout.types.sample import (
    MessageDict,
    RolloutErrorCategory,
    RolloutSample,
    RolloutStatus,
    _finite_timeout,
)

POLLING_LEASE_HEADER = "X-Osmosis-Rollout-Lease"
NOTES_HEADER = "X-Osmosis-Rollout-Notes"
"""Sent (``1``) by our controller on a result poll to ask for the result's ``notes`` (the
grader's reason, where user code failed); without it the result is exactly the official
server's, key for key."""
"""Header carrying the polling lease token on ``GET /rollout/{id}/result``."""


class RolloutInitRequest(BaseModel):
    """Body of ``POST /rollout``. Unknown keys (old callback fields) are ignored."""

    initial_messages: list[MessageDict]
    label: str | None = None
    metadata: dict[str, Any] | None = None
    rollout_id: str
    chat_completions_url: str
    llm_api_key: str | None = None
    grade: bool = True
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None
    extra_fields: dict[str, Any] | None = None

    @field_validator("rollout_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        return ensure_rollout_id(value)

    @field_validator("llm_api_key")
    @classmethod
    def _check_key(cls, value: str | None) -> str | None:
        if value == "":
            raise ValueError("llm_api_key must be omitted (null) or a non-empty string")
        return value

    @field_validator("agent_timeout_sec", "grader_timeout_sec")
    @classmethod
    def _check_timeout(cls, value: float | None) -> float | None:
        return _finite_timeout(value)


class RolloutInitResponse(BaseModel):
    """The 202 body of ``POST /rollout``: the lease the controller must poll under."""

    rollout_id: str
    status: RolloutStatus
    polling_lease_token: str = Field(min_length=1)
    result_wait_timeout_sec: float
    polling_lease_timeout_sec: float

    @model_validator(mode="after")
    def _check_timeouts(self) -> Self:
        wait, lease = self.result_wait_timeout_sec, self.polling_lease_timeout_sec
        if not math.isfinite(wait) or wait <= 0:
            raise ValueError("result_wait_timeout_sec must be finite and > 0")
        if not math.isfinite(lease) or lease <= wait:
            raise ValueError(
                "polling_lease_timeout_sec must be finite and > result_wait_timeout_sec"
            )
        return self


class RolloutResultResponse(BaseModel):
    """Body of ``GET /rollout/{id}/result``: current status, or the terminal result.

    Keys beyond these are kept (the official model ignores them): a server of ours adds
    ``notes`` to a terminal result, the grader's reason (``grader_reason``) and, for a
    failure in user code, its ``phase``, ``where`` (the user's frame) and ``traceback``.
    """

    model_config = ConfigDict(extra="allow")

    rollout_id: str
    status: RolloutStatus
    sample: RolloutSample | None = None
    err_message: str | None = None
    err_category: RolloutErrorCategory | None = None


class CancelRolloutsRequest(BaseModel):
    """Body of ``POST /rollout/cancel``: exactly one of ``ids``, ``prefix`` or ``all``."""

    ids: list[str] | None = None
    prefix: str | None = None
    all: bool = False


class CancelRolloutsResponse(BaseModel):
    """Per-id disposition: ``cancelled_queued``, ``cancelled_running`` or ``not_found``."""

    dispositions: dict[str, str]


class RolloutLifecycle(BaseModel):
    """Server-owned admission state reported by ``/health``."""

    accepting_rollouts: bool
    active_rollouts: int = Field(ge=0)
