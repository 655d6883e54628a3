"""Samples, statuses, error categories and the backend's request/result models."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from osmosis_rollout._internal import json_safe as _json_safe
from osmosis_rollout._internal.ids import ensure_single_path_segment

logger = logging.getLogger(__name__)

MessageDict = dict[str, Any]
"""One chat message."""
SampleMessage = Mapping[str, Any]
"""One chat message as a sample holds it (read-only view; the official SDK's name)."""


class RolloutStatus(StrEnum):
    """Lifecycle states while in flight, and terminal states once finished."""

    QUEUED = "queued"
    RUNNING = "running"
    GRADING = "grading"
    SUCCESS = "success"
    FAILURE = "failure"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"

    @property
    def is_terminal(self) -> bool:
        """True for ``success``, ``failure`` and ``cancelled``."""
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED}
)


class RolloutErrorCategory(StrEnum):
    """Why a rollout failed, as the wire reports it."""

    TIMEOUT = "timeout"
    LEASE_EXPIRED = "lease_expired"
    VALIDATION_ERROR = "validation_error"
    HTTP_ERROR = "http_error"
    AGENT_ERROR = "agent_error"
    INTERNAL_ERROR = "internal_error"


class RolloutSample(BaseModel):
    """The one conversation a rollout produced, with its reward once graded.

    ``reward`` must be a finite number or ``None`` (not graded), on construction and on
    assignment, so ``GraderContext.set_reward(float("nan"))`` fails at the grader.
    ``trajectory_messages`` defaults to a deep copy of ``messages`` (the chat-format view
    used for the ATIF trajectory); pass ``None`` explicitly to disable persistence.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(allow_inf_nan=False, validate_assignment=True)

    messages: Sequence[Mapping[str, Any]] = Field(default_factory=list)
    trajectory_messages: Sequence[Mapping[str, Any]] | None = None
    label: str | None = None
    reward: float | None = None
    remove_sample: bool = False
    metrics: dict[str, Any] = Field(default_factory=dict)
    extra_fields: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _snapshot_trajectory(self) -> Self:
        if "trajectory_messages" not in self.model_fields_set:
            try:
                snapshot = copy.deepcopy(list(self.messages))
            except Exception:
                logger.warning("could not copy messages for the trajectory; persistence is off")
                snapshot = None
            # Bypass validate_assignment: this runs inside validation already.
            self.__dict__["trajectory_messages"] = snapshot
        return self

    def json_safe_copy(self) -> Self:
        """Return a copy whose ``metrics`` and ``extra_fields`` encode as strict JSON.

        A clean sample is returned as the same object; dropped values log one warning.
        """
        if not (
            _json_safe.needs_fixing(self.metrics) or _json_safe.needs_fixing(self.extra_fields)
        ):
            return self
        dropped: list[str] = []
        fixed = self.model_copy(
            update={
                "metrics": _json_safe.json_safe(self.metrics, dropped),
                "extra_fields": _json_safe.json_safe(self.extra_fields, dropped),
            }
        )
        if dropped:
            logger.warning(
                "dropped values with no JSON form from sample metrics/extra_fields: %s",
                ", ".join(sorted(set(dropped))),
            )
        return fixed


def _finite_timeout(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError(
            "timeout must be a finite number of seconds; omit it (null) to run unbounded"
        )
    return value


class ExecutionRequest(BaseModel):
    """One rollout for a backend to execute."""

    id: str
    prompt: list[MessageDict]
    label: str | None = None
    metadata: dict[str, Any] | None = None
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None
    grade: bool = True

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        return ensure_single_path_segment(value, label="rollout_id")

    @field_validator("agent_timeout_sec", "grader_timeout_sec")
    @classmethod
    def _check_timeout(cls, value: float | None) -> float | None:
        return _finite_timeout(value)


class ExecutionResult(BaseModel):
    """The result of one phase. ``extra_fields`` holds diagnostics and never reaches the wire."""

    status: RolloutStatus
    sample: RolloutSample | None = None
    err_message: str | None = None
    err_category: RolloutErrorCategory | None = None
    extra_fields: dict[str, Any] | None = None


class ExecutionOutcome(BaseModel):
    """The workflow phase's result and, when grading ran or was due, the grader's."""

    workflow: ExecutionResult
    grader: ExecutionResult | None = None

    @property
    def result(self) -> ExecutionResult:
        """What the wire carries.

        A failed workflow reports itself (borrowing the grader's sample if it has none);
        a successful one reports the grader's result when there is one.
        """
        if self.workflow.status is not RolloutStatus.SUCCESS:
            if (
                self.workflow.sample is None
                and self.grader is not None
                and self.grader.sample is not None
            ):
                return self.workflow.model_copy(update={"sample": self.grader.sample})
            return self.workflow
        return self.grader if self.grader is not None else self.workflow

    @property
    def result_to_save(self) -> ExecutionResult:
        """What is archived: the grader's result if it carries a sample, else the workflow's."""
        if self.grader is not None and self.grader.sample is not None:
            return self.grader
        return self.workflow
