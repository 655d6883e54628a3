"""Best-effort persistence of a finished rollout: ``trajectory.json`` and ``diagnostics.json``.

Files land beside the rollout's artifacts::

    <root>/<rollout_id>/trajectory.json    when the sample has trajectory_messages
    <root>/<rollout_id>/diagnostics.json   when there are diagnostics

Each file is written to a temporary name in the same directory and moved into place with
``os.replace``, so a reader never sees half a document. Saving never raises: a failure is
logged and never changes a reward or a status. Every string goes through the
:class:`~osmosis_rollout.redaction.Redactor` first (by default, the credentials found in
the environment), so a key a workflow echoed or a grader put in its error stays out.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from osmosis_rollout._internal import json_safe as _json_safe
from osmosis_rollout._internal.atomic import write_text_atomic
from osmosis_rollout._internal.ids import is_single_path_segment
from osmosis_rollout.redaction import Redactor, environment_redactor
from osmosis_rollout.runs.artifacts import default_artifact_root
from osmosis_rollout.trajectory.atif import build_atif, format_atif
from osmosis_rollout.trajectory.converter import trajectory_document
from osmosis_rollout.trajectory.report import TrajectoryReport
from osmosis_rollout.types import ExecutionResult, RolloutSample

__all__ = [
    "DIAGNOSTICS_FILENAME",
    "TRAJECTORY_FILENAME",
    "WriteFailureCallback",
    "save_trajectory",
    "write_trajectory",
]

logger = logging.getLogger(__name__)

WriteFailureCallback = Callable[[Path, OSError], None]
"""Told of a file that could not be written: its path and the error."""

TRAJECTORY_FILENAME = "trajectory.json"
DIAGNOSTICS_FILENAME = "diagnostics.json"


def write_trajectory(
    root: Path | str | None,
    rollout_id: str,
    result: ExecutionResult,
    *,
    label: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    extra_fields: Mapping[str, Any] | None = None,
    diagnostics: Mapping[str, Any] | None = None,
    redactor: Redactor | None = None,
    report: TrajectoryReport | None = None,
    on_write_failure: WriteFailureCallback | None = None,
) -> Path | None:
    """Write the rollout's ATIF document and diagnostics under ``<root>/<rollout_id>/``, now.

    ``label``, ``metadata`` and ``extra_fields`` are the request's (they go to
    ``extra.osmosis``). ``diagnostics`` overrides ``result.extra_fields`` for the
    ``diagnostics.json`` sidecar, which is written even when there is no sample.
    ``root=None`` means the default artifact root, resolved now. ``redactor`` defaults to
    the environment's secrets (:func:`~osmosis_rollout.redaction.environment_redactor`).
    ``report`` (a :class:`~osmosis_rollout.trajectory.report.TrajectoryReport`) adds
    per-call metrics: a lone sample entry applies to the rollout's sample, several are kept
    unattributed.

    Returns the path of ``trajectory.json`` when it was written, else ``None`` (no sample,
    ``trajectory_messages`` is ``None``, an unusable rollout id, or an I/O failure).
    Never raises. Synchronous, for callers that choose their own thread;
    :func:`save_trajectory` is the official SDK's awaited form. A file that could not be
    written (a full disk) is logged as best-effort, as the official SDK does, or, with
    ``on_write_failure``, handed to it as ``(path, exc)``: a caller that must not lose
    trajectories silently (the pytest plugin) stops its run.
    """
    return _save_logged(
        root,
        rollout_id,
        result,
        label,
        metadata,
        extra_fields,
        diagnostics,
        redactor,
        report,
        on_write_failure,
    )


async def save_trajectory(
    *,
    rollout_id: str,
    result: ExecutionResult,
    request_label: str | None = None,
    request_metadata: dict[str, Any] | None = None,
    request_extra_fields: dict[str, Any] | None = None,
    report: TrajectoryReport | None = None,
    artifact_root: Path | None = None,
    diagnostics: dict[str, Any] | None = None,
) -> None:
    """The official SDK's call: save the rollout's files in a worker thread. Never raises.

    The same files as :func:`write_trajectory` (``artifact_root`` is its ``root``,
    ``request_*`` its ``label``/``metadata``/``extra_fields``), redacted with the
    environment's secrets.
    """
    await asyncio.to_thread(
        _save_logged,
        artifact_root,
        rollout_id,
        result,
        request_label,
        request_metadata,
        request_extra_fields,
        diagnostics,
        None,
        report,
    )


def _save_logged(
    root: Path | str | None,
    rollout_id: str,
    result: ExecutionResult,
    label: str | None,
    metadata: Mapping[str, Any] | None,
    extra_fields: Mapping[str, Any] | None,
    diagnostics: Mapping[str, Any] | None,
    redactor: Redactor | None,
    report: TrajectoryReport | None,
    on_write_failure: WriteFailureCallback | None = None,
) -> Path | None:
    try:
        redactor = redactor if redactor is not None else environment_redactor()
        return _save(
            root,
            rollout_id,
            result,
            label,
            metadata,
            extra_fields,
            diagnostics,
            redactor,
            report,
            on_write_failure,
        )
    except Exception:
        # The official SDK's wording: log lines people grep for read the same.
        logger.warning(
            "Failed to save the trajectory for rollout %s (best-effort)", rollout_id, exc_info=True
        )
        return None


def _save(
    root: Path | str | None,
    rollout_id: str,
    result: ExecutionResult,
    label: str | None,
    metadata: Mapping[str, Any] | None,
    extra_fields: Mapping[str, Any] | None,
    diagnostics: Mapping[str, Any] | None,
    redactor: Redactor,
    report: TrajectoryReport | None = None,
    on_write_failure: WriteFailureCallback | None = None,
) -> Path | None:
    if not isinstance(rollout_id, str) or not is_single_path_segment(rollout_id):
        logger.warning("not saving a trajectory for unsafe rollout id %r", rollout_id)
        return None
    base = Path(root) if root is not None else default_artifact_root()

    payload = diagnostics if diagnostics is not None else result.extra_fields
    if payload is not None:
        # Written first and on its own: a failed rollout with no sample still leaves a record.
        path = base.joinpath(rollout_id, DIAGNOSTICS_FILENAME)
        try:
            _write_atomic(path, _diagnostics_text(redactor.redact_value(dict(payload))))
        except OSError as exc:
            if on_write_failure is None:
                raise
            on_write_failure(path, exc)
        except Exception:
            logger.warning(
                "Failed to save the diagnostics for rollout %s (best-effort)",
                rollout_id,
                exc_info=True,
            )

    sample = result.sample
    if sample is None:
        return None
    if sample.trajectory_messages is None:
        # The explicit opt-out (or an upstream conversion that already warned): the official
        # SDK's info line, so a log search for it finds ours too.
        logger.info(
            "Skipping trajectory for rollout %s: no trajectory messages "
            "(persistence disabled or conversion failed upstream)",
            rollout_id,
        )
        return None
    doc = (
        build_atif(rollout_id, sample, label=label, metadata=metadata, extra_fields=extra_fields)
        if report is None
        else _reported_document(rollout_id, sample, label, metadata, extra_fields, report)
    )
    text = _text_without_secrets(doc, redactor)
    if text is None:
        doc = redactor.redact_value(doc)
        try:
            text = format_atif(doc)
        except (TypeError, ValueError) as exc:
            # Something inside a message (a NaN, an object) has no JSON form: drop just that.
            dropped: list[str] = []
            text = format_atif(_json_safe.json_safe(doc, dropped))
            logger.warning(
                "trajectory of rollout %r: dropped values with no JSON form (%s): %s",
                rollout_id,
                ", ".join(sorted(set(dropped))),
                exc,
            )
    dest = base.joinpath(rollout_id, TRAJECTORY_FILENAME)  # one join: this runs per rollout
    try:
        _write_atomic(dest, text + "\n")
    except OSError as exc:
        if on_write_failure is None:
            raise
        on_write_failure(dest, exc)
        return None
    return dest


def _text_without_secrets(doc: Mapping[str, Any], redactor: Redactor) -> str | None:
    """``doc`` formatted, when no secret is in it (the usual case), else ``None``.

    Redacting first would copy the whole document to find nothing to replace; checking the
    formatted text proves the same (see :meth:`Redactor.absent_from_json`). ``None`` when a
    secret may be there or ``doc`` cannot be formatted: the caller redacts and handles it.
    """
    try:
        text = format_atif(doc)
    except (TypeError, ValueError):
        return None
    return text if redactor.absent_from_json(text) else None


def _reported_document(
    rollout_id: str,
    sample: RolloutSample,
    label: str | None,
    metadata: Mapping[str, Any] | None,
    extra_fields: Mapping[str, Any] | None,
    report: TrajectoryReport,
) -> dict[str, Any]:
    # The rollout has one sample: a lone entry is its report whatever its key.
    matched = next(iter(report.samples.values())) if len(report.samples) == 1 else None
    unmatched = dict(report.samples) if len(report.samples) > 1 else None
    if unmatched:
        logger.warning(
            "Trajectory report for rollout %s has %d entries but the rollout "
            "produced one sample; preserving them under "
            "extra.osmosis.unmatched_sample_reports",
            rollout_id,
            len(unmatched),
        )
    return trajectory_document(
        sample,
        rollout_id=rollout_id,
        request_label=label,
        request_metadata=dict(metadata) if metadata is not None else None,
        request_extra_fields=dict(extra_fields) if extra_fields is not None else None,
        report=matched,
        default_model_name=report.model_name,
        unmatched_sample_reports=unmatched,
    )


def _diagnostics_text(payload: Mapping[str, Any]) -> str:
    try:
        return json.dumps(
            payload, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False, default=str
        )
    except (TypeError, ValueError):
        dropped: list[str] = []
        return json.dumps(
            _json_safe.json_safe(dict(payload), dropped),
            indent=2,
            sort_keys=True,
            ensure_ascii=False,
            allow_nan=False,
        )


def _write_atomic(dest: Path, text: str) -> None:
    # backslashreplace turns a lone surrogate into its \\uXXXX JSON escape, keeping the
    # file valid UTF-8 JSON.
    write_text_atomic(dest, text, errors="backslashreplace")
