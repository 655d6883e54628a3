"""A rollout sample -> its ATIF v1.7 document, with optional per-call metrics.

:func:`convert_sample_to_trajectory` is the official SDK's entry point, kept at its import
path; the step rules are in :mod:`osmosis_rollout.trajectory.steps` and the document layout in
:mod:`osmosis_rollout.trajectory.atif`. Documents are plain ``dict`` objects ready for
``json.dumps`` (the official SDK returns a pydantic model of the same JSON).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from osmosis_rollout.trajectory.atif import ATIF_PRODUCER_NAME, build_atif
from osmosis_rollout.trajectory.models import Trajectory
from osmosis_rollout.trajectory.report import LlmCallMetrics, SampleReport
from osmosis_rollout.trajectory.steps import messages_to_steps
from osmosis_rollout.types import RolloutSample

__all__ = [
    "ATIF_PRODUCER_NAME",
    "Trajectory",
    "convert_sample_to_trajectory",
    "messages_to_steps",
    "trajectory_document",
]

# Per-call totals summed into final_metrics when the report gives none.
_TOTALS = {
    "prompt_tokens": "total_prompt_tokens",
    "completion_tokens": "total_completion_tokens",
    "cached_tokens": "total_cached_tokens",
    "cost_usd": "total_cost_usd",
}


def convert_sample_to_trajectory(
    sample: RolloutSample,
    *,
    rollout_id: str,
    request_label: str | None = None,
    request_metadata: dict[str, Any] | None = None,
    request_extra_fields: dict[str, Any] | None = None,
    report: SampleReport | None = None,
    default_model_name: str | None = None,
    unmatched_sample_reports: Mapping[str, SampleReport] | None = None,
) -> Trajectory:
    """The ATIF trajectory of a rollout's sample, as the official SDK's pydantic model.

    The document of :func:`trajectory_document` (same arguments), validated: a sample whose
    ``trajectory_messages`` hold no step raises pydantic's ``ValidationError`` (a
    ``ValueError``), as the official's does, where the package's own writers put a
    placeholder step. ``to_json_dict()`` gives the JSON document back.
    """
    doc = trajectory_document(
        sample,
        rollout_id=rollout_id,
        request_label=request_label,
        request_metadata=request_metadata,
        request_extra_fields=request_extra_fields,
        report=report,
        default_model_name=default_model_name,
        unmatched_sample_reports=unmatched_sample_reports,
        placeholder=False,
    )
    return Trajectory.model_validate(doc)


def trajectory_document(
    sample: RolloutSample,
    *,
    rollout_id: str,
    request_label: str | None = None,
    request_metadata: Mapping[str, Any] | None = None,
    request_extra_fields: Mapping[str, Any] | None = None,
    report: SampleReport | None = None,
    default_model_name: str | None = None,
    unmatched_sample_reports: Mapping[str, SampleReport] | None = None,
    placeholder: bool = True,
) -> dict[str, Any]:
    """Build the ATIF document of a rollout's sample as a ``dict`` ready for ``json.dumps``.

    Raises ``ValueError`` when ``sample.trajectory_messages`` is ``None`` (the sample opted
    out of a trajectory). ``report``'s per-call metrics go onto the agent steps in order when
    there is exactly one per agent step, else they are kept under
    ``extra.osmosis.unmatched_llm_call_metrics`` rather than attributed to the wrong step.
    ``final_metrics`` takes the report's totals, else the sums of its per-call metrics.
    ``unmatched_sample_reports`` (reports no sample claimed) are kept under ``extra.osmosis``.
    Messages that make no step give one placeholder step (ATIF needs one), unless
    ``placeholder`` is false.
    """
    if sample.trajectory_messages is None:
        raise ValueError("the sample has no trajectory_messages to convert")
    doc = build_atif(
        rollout_id,
        sample,
        label=request_label,
        metadata=request_metadata,
        extra_fields=request_extra_fields,
        placeholder=placeholder,
    )
    osmosis: dict[str, Any] = doc["extra"]["osmosis"]
    model_name = (report.model_name if report is not None else None) or default_model_name
    if model_name is not None:
        doc["agent"]["model_name"] = model_name
    if report is not None and report.llm_call_metrics:
        unmatched = _overlay_calls(doc["steps"], report.llm_call_metrics)
        if unmatched is not None:
            osmosis["unmatched_llm_call_metrics"] = unmatched
    if report is not None and (report.llm_call_metrics or report.final_metrics):
        doc["final_metrics"].update(_final_metrics(report))
    if unmatched_sample_reports:
        osmosis["unmatched_sample_reports"] = {
            key: value.model_dump(exclude_none=True)
            for key, value in unmatched_sample_reports.items()
        }
    return doc


def _overlay_calls(
    steps: list[dict[str, Any]], calls: list[LlmCallMetrics]
) -> list[dict[str, Any]] | None:
    agent_steps = [step for step in steps if step.get("source") == "agent"]
    if len(agent_steps) != len(calls):
        return [call.model_dump(exclude_none=True) for call in calls]
    for step, call in zip(agent_steps, calls, strict=True):
        reported = call.model_dump(exclude={"model_name"}, exclude_none=True)
        if reported:
            # Field by field: a count-only report must not erase token ids the message carried.
            step["metrics"] = {**(step.get("metrics") or {}), **reported}
        if call.model_name:
            step["model_name"] = call.model_name
        step["llm_call_count"] = 1
    return None


def _final_metrics(report: SampleReport) -> dict[str, Any]:
    given = {
        key: value
        for key, value in (report.final_metrics or {}).items()
        if key != "total_steps" and value is not None
    }
    if given:
        return given
    totals: dict[str, Any] = {}
    for field, total in _TOTALS.items():
        present = [
            value for call in report.llm_call_metrics if (value := getattr(call, field)) is not None
        ]
        if present:
            totals[total] = sum(present)
    return totals
