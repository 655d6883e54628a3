"""Configuration models for workflows and graders."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field


class ConcurrencyConfig(BaseModel):
    """How many rollouts of a workflow may run at once. ``None`` means unbounded."""

    max_concurrent: int | None = Field(default=None, ge=1)


class BaseConfig(BaseModel):
    """Base of every user config: a name, a description, and any extra fields the user adds."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="allow", validate_assignment=True, arbitrary_types_allowed=True
    )

    name: str
    description: str | None = None


class AgentWorkflowConfig(BaseConfig):
    """Config handed to an :class:`~osmosis_rollout.AgentWorkflow` (deep-copied per rollout)."""

    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)


class GraderConfig(BaseConfig):
    """Config handed to a :class:`~osmosis_rollout.Grader`. ``concurrency`` is accepted but unused."""

    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)
