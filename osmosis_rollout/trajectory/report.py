"""Per-call LLM metrics a controller may hand to trajectory conversion.

A :class:`TrajectoryReport` holds, per sample, the metrics of each model call in dispatch order
(token counts, cost, token ids, log-probabilities). :func:`convert_sample_to_trajectory
<osmosis_rollout.trajectory.converter.convert_sample_to_trajectory>` overlays them onto the
document's agent steps. The long-polling protocol does not carry reports;
:func:`report_from_response` parses the ``trajectory`` object of a legacy callback
acknowledgement, the official SDK's call shape. All models ignore unknown fields.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from osmosis_rollout.trajectory.models import Metrics

if TYPE_CHECKING:
    import httpx

__all__ = ["LlmCallMetrics", "SampleReport", "TrajectoryReport", "report_from_response"]

logger = logging.getLogger(__name__)


class LlmCallMetrics(Metrics):
    """The metrics of one model call: an ATIF step's ``metrics``, plus the model."""

    # A controller's report is read leniently, unlike a document: unknown keys are dropped.
    model_config: ClassVar[ConfigDict] = ConfigDict(extra="ignore", allow_inf_nan=True)

    model_name: str | None = None


class SampleReport(BaseModel):
    """One sample's model name, per-call metrics and optional totals (``final_metrics``)."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="ignore")

    model_name: str | None = None
    llm_call_metrics: list[LlmCallMetrics] = Field(default_factory=list)
    final_metrics: dict[str, Any] | None = None


class TrajectoryReport(BaseModel):
    """A rollout's report: a default model name and a :class:`SampleReport` per sample id."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="ignore")

    model_name: str | None = None
    samples: dict[str, SampleReport] = Field(default_factory=dict)


def report_from_response(response: httpx.Response) -> TrajectoryReport | None:
    """The ``trajectory`` object of a callback acknowledgement, or ``None``.

    Best-effort: a body that is not JSON, not an object, has no ``trajectory`` or a malformed
    one gives ``None`` (a malformed one is logged).
    """
    try:
        body = response.json()
    except ValueError:
        return None
    if not isinstance(body, Mapping) or body.get("trajectory") is None:
        return None
    try:
        return TrajectoryReport.model_validate(body["trajectory"])
    except ValidationError:
        logger.warning(
            "ignoring a malformed trajectory report in a callback response", exc_info=True
        )
        return None
