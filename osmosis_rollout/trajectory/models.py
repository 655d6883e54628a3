"""The ATIF v1.7 document as pydantic models: what ``convert_sample_to_trajectory`` returns.

The official SDK's fields and rules (step ids sequential from 1, agent-only fields on agent
steps only, observations naming a tool call of their step, ISO 8601 timestamps, no NaN or
infinity). Inside this package documents stay plain ``dict`` objects (:mod:`.atif` says why):
``Trajectory.model_validate(doc)`` turns one into the other, and ``to_json_dict()`` back.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "Agent",
    "ContentPart",
    "FinalMetrics",
    "ImageSource",
    "Metrics",
    "Observation",
    "ObservationResult",
    "Step",
    "SubagentTrajectoryRef",
    "ToolCall",
    "Trajectory",
]

SchemaVersion = Literal[
    "ATIF-v1.0",
    "ATIF-v1.1",
    "ATIF-v1.2",
    "ATIF-v1.3",
    "ATIF-v1.4",
    "ATIF-v1.5",
    "ATIF-v1.6",
    "ATIF-v1.7",
]
AGENT_ONLY_FIELDS = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
"""The step fields ATIF allows on agent steps only."""


class _Model(BaseModel):
    # Unknown keys are errors and non-finite floats are refused: a document must be JSON.
    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", allow_inf_nan=False)


class ImageSource(_Model):
    """Where an image of a multimodal message is stored."""

    media_type: Literal["image/jpeg", "image/png", "image/gif", "image/webp"]
    path: str


class ContentPart(_Model):
    """One part of a multimodal message: text, or an image."""

    type: Literal["text", "image"]
    text: str | None = None
    source: ImageSource | None = None

    @model_validator(mode="after")
    def _one_payload(self) -> Self:
        if self.type == "text" and (self.text is None or self.source is not None):
            raise ValueError("a text part needs 'text' and no 'source'")
        if self.type == "image" and (self.source is None or self.text is not None):
            raise ValueError("an image part needs 'source' and no 'text'")
        return self


class Agent(_Model):
    """The agent that produced the trajectory."""

    name: str
    version: str
    model_name: str | None = None
    tool_definitions: list[dict[str, Any]] | None = None
    extra: dict[str, Any] | None = None


class Metrics(_Model):
    """One LLM call's tokens, cost, token ids and log-probabilities."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    cost_usd: float | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class FinalMetrics(_Model):
    """Totals over the whole trajectory."""

    total_prompt_tokens: int | None = None
    total_completion_tokens: int | None = None
    total_cached_tokens: int | None = None
    total_cost_usd: float | None = None
    total_steps: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None


class ToolCall(_Model):
    """A tool call an agent step made."""

    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    extra: dict[str, Any] | None = None


class SubagentTrajectoryRef(_Model):
    """A delegated agent's trajectory, embedded (by id) or in another file (by path)."""

    trajectory_id: str | None = None
    session_id: str | None = None
    trajectory_path: str | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _resolvable(self) -> Self:
        if self.trajectory_id is None and self.trajectory_path is None:
            raise ValueError("a subagent reference needs trajectory_id or trajectory_path")
        return self


class ObservationResult(_Model):
    """One result fed back to the agent (a tool's output, usually)."""

    source_call_id: str | None = None
    content: str | list[ContentPart] | None = None
    subagent_trajectory_ref: list[SubagentTrajectoryRef] | None = None
    extra: dict[str, Any] | None = None


class Observation(_Model):
    """What the environment answered to a step."""

    results: list[ObservationResult]


class Step(_Model):
    """One turn: a system, user or agent message, with the agent's calls and their results."""

    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: str | list[ContentPart]
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    is_copied_context: bool | None = None
    llm_call_count: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None

    @field_validator("timestamp")
    @classmethod
    def _iso_8601(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError as exc:
                raise ValueError(f"timestamp {value!r} is not ISO 8601: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _agent_only_fields(self) -> Self:
        if self.source != "agent":
            present = [name for name in AGENT_ONLY_FIELDS if getattr(self, name) is not None]
            if present:
                raise ValueError(
                    f"{', '.join(present)} only allowed on agent steps, not {self.source!r}"
                )
        elif self.llm_call_count == 0 and (
            self.metrics is not None or self.reasoning_content is not None
        ):
            raise ValueError(
                "metrics and reasoning_content must be absent when llm_call_count is 0"
            )
        return self


class Trajectory(_Model):
    """An ATIF document: the agent, its steps, totals and ``extra`` (osmosis keeps its own
    fields under ``extra.osmosis``)."""

    schema_version: SchemaVersion = "ATIF-v1.7"
    session_id: str | None = None
    trajectory_id: str | None = None
    agent: Agent
    steps: list[Step] = Field(min_length=1)
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    continued_trajectory_ref: str | None = None
    extra: dict[str, Any] | None = None
    subagent_trajectories: list[Trajectory] | None = None

    def to_json_dict(self, exclude_none: bool = True) -> dict[str, Any]:
        """The document as JSON-ready dicts and lists (``None`` fields left out by default)."""
        return self.model_dump(exclude_none=exclude_none, mode="json")

    @model_validator(mode="after")
    def _sequential_step_ids(self) -> Self:
        for index, step in enumerate(self.steps):
            if step.step_id != index + 1:
                raise ValueError(
                    f"steps[{index}].step_id: expected {index + 1} (sequential from 1), "
                    f"got {step.step_id}"
                )
        return self

    @model_validator(mode="after")
    def _unique_subagent_ids(self) -> Self:
        seen: set[str] = set()
        for index, subagent in enumerate(self.subagent_trajectories or ()):
            if subagent.trajectory_id is None:
                raise ValueError(f"subagent_trajectories[{index}] needs a trajectory_id")
            if subagent.trajectory_id in seen:
                raise ValueError(
                    f"subagent_trajectories[{index}].trajectory_id "
                    f"{subagent.trajectory_id!r} is used twice"
                )
            seen.add(subagent.trajectory_id)
        return self

    @model_validator(mode="after")
    def _observations_name_their_calls(self) -> Self:
        for step in self.steps:
            if step.observation is None:
                continue
            call_ids = {call.tool_call_id for call in step.tool_calls or ()}
            for result in step.observation.results:
                if result.source_call_id is not None and result.source_call_id not in call_ids:
                    raise ValueError(
                        f"step {step.step_id}: observation names tool call "
                        f"{result.source_call_id!r}, which the step did not make"
                    )
        return self
