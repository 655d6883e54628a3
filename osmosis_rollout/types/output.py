"""What ``AgentWorkflow.run`` may return."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

Messages = list[dict[str, Any]]
"""A chat history: a list of message dicts, in whatever shape the framework uses."""


class AgentWorkflowOutput(BaseModel):
    """One message history plus optional finite metrics. ``info`` is kept but never graded."""

    model_config: ClassVar[ConfigDict] = ConfigDict(
        extra="forbid", allow_inf_nan=False, revalidate_instances="always"
    )

    messages: Messages | None = None
    metrics: dict[str, float] = Field(default_factory=dict)
    info: dict[str, Any] = Field(default_factory=dict)


def coerce_output(value: object) -> AgentWorkflowOutput | None:
    """Normalise a ``run()`` return value; ``None`` means "use the context's sample source".

    An ``AgentWorkflowOutput`` is re-validated, so metrics mutated in place to NaN are caught.
    """
    if value is None:
        return None
    if isinstance(value, AgentWorkflowOutput):
        return AgentWorkflowOutput.model_validate(value)
    if isinstance(value, list):
        return AgentWorkflowOutput(messages=value)
    raise TypeError(
        "run() must return AgentWorkflowOutput, a list of messages, or None; "
        f"got {type(value).__name__}"
    )
