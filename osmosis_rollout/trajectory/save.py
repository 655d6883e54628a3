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
from osmosis_rollout.trajectory.atif import format_atif
from osmosis_rollout.trajectory.converter import trajectory_document
from osmosis_rollout.trajectory.report import TrajectoryReport
from osmosis_rollout.types import ExecutionResult

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
    try:
        if not isinstance(rollout_id, str) or not is_single_path_segment(rollout_id):
            logger.warning("not saving a trajectory for unsafe rollout id %r", rollout_id)
            return None
        redactor = redactor if redactor is not None else environment_redactor()
        base = Path(root) if root is not None else default_artifact_root()
        payload = diagnostics if diagnostics is not None else result.extra_fields
        if payload is not None:
            # Written first and on its own: a failed rollout with no sample still leaves a record.
            try:
                text = _diagnostics_text(redactor.redact_value(dict(payload)))
            except Exception:
                logger.warning(
                    "Failed to save the diagnostics for rollout %s (best-effort)",
                    rollout_id,
                    exc_info=True,
                )
            else:
                _write(base.joinpath(rollout_id, DIAGNOSTICS_FILENAME), text, on_write_failure)
        sample = result.sample
        if sample is None:
            return None
        if sample.trajectory_messages is None:
            # The explicit opt-out (or an upstream conversion that already warned): the
            # official SDK's info line, so a log search for it finds ours too.
            logger.info(
                "Skipping trajectory for rollout %s: no trajectory messages "
                "(persistence disabled or conversion failed upstream)",
                rollout_id,
            )
            return None
        # The rollout has one sample: a lone report entry is its report whatever its key.
        samples = report.samples if report is not None else {}
        if len(samples) > 1:
            logger.warning(
                "Trajectory report for rollout %s has %d entries but the rollout "
                "produced one sample; preserving them under "
                "extra.osmosis.unmatched_sample_reports",
                rollout_id,
                len(samples),
            )
        doc = trajectory_document(
            sample,
            rollout_id=rollout_id,
            request_label=label,
            request_metadata=metadata,
            request_extra_fields=extra_fields,
            report=next(iter(samples.values())) if len(samples) == 1 else None,
            default_model_name=report.model_name if report is not None else None,
            unmatched_sample_reports=samples if len(samples) > 1 else None,
        )
        dest = base.joinpath(rollout_id, TRAJECTORY_FILENAME)  # one join: this runs per rollout
        written = _write(dest, _trajectory_text(doc, redactor, rollout_id) + "\n", on_write_failure)
        return dest if written else None
    except Exception:
        # The official SDK's wording: log lines people grep for read the same.
        logger.warning(
            "Failed to save the trajectory for rollout %s (best-effort)", rollout_id, exc_info=True
        )
        return None


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
    """The official SDK's call: :func:`write_trajectory` in a worker thread. Never raises.

    ``artifact_root`` is its ``root``, ``request_*`` its ``label``/``metadata``/
    ``extra_fields``; redacted with the environment's secrets.
    """
    await asyncio.to_thread(
        write_trajectory,
        artifact_root,
        rollout_id,
        result,
        label=request_label,
        metadata=request_metadata,
        extra_fields=request_extra_fields,
        diagnostics=diagnostics,
        report=report,
    )


def _trajectory_text(doc: dict[str, Any], redactor: Redactor, rollout_id: str) -> str:
    """``doc`` formatted, redacted, with values that have no JSON form dropped."""
    try:
        text = format_atif(doc)
    except (TypeError, ValueError):
        text = None
    # Redacting first would copy the whole document to find nothing to replace; checking the
    # formatted text proves the same (see :meth:`Redactor.absent_from_json`).
    if text is not None and redactor.absent_from_json(text):
        return text
    doc = redactor.redact_value(doc)
    try:
        return format_atif(doc)
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
        return text


def _diagnostics_text(payload: Mapping[str, Any]) -> str:
    try:
        return json.dumps(
            payload, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False, default=str
        )
    except (TypeError, ValueError):
        safe = _json_safe.json_safe(dict(payload), [])
        return json.dumps(safe, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)


def _write(path: Path, text: str, on_write_failure: WriteFailureCallback | None) -> bool:
    """Whether ``text`` is now at ``path``; a failed write is raised, or handed to
    ``on_write_failure`` when there is one."""
    try:
        # backslashreplace turns a lone surrogate into its \\uXXXX JSON escape, keeping the
        # file valid UTF-8 JSON.
        write_text_atomic(path, text, errors="backslashreplace")
    except OSError as exc:
        if on_write_failure is None:
            raise
        on_write_failure(path, exc)
        return False
    return True
