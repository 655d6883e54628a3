"""Run one rollout in this process: the single path the server, the plugin and fixtures share.

:func:`execute_in_process` takes an :class:`~osmosis_rollout.types.ExecutionRequest` and the
rollout's :class:`~osmosis_rollout.context.RolloutContext`, runs the backend inside that
context and returns an :class:`ExecutedRollout`: the result, and where its trajectory was
saved. It never raises for anything user code does; cancellation (``asyncio.CancelledError``)
and ``GeneratorExit`` (the coroutine being closed) propagate, since they come from the caller.

Two failures are turned into results here rather than in a backend: an ``execute`` that
raised an ``Exception`` (categorized as usual), and user code that raised a
``BaseException`` such as ``SystemExit`` or ``KeyboardInterrupt``. Left alone, the latter
would escape the rollout's task and stop the event loop every other rollout runs on;
here it fails only its own rollout, blamed on the phase (workflow or grader) that raised it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_rollout._internal.user_frames import user_error_fields
from osmosis_rollout.backend.base import ExecutionBackend
from osmosis_rollout.backend.local import categorize_exception
from osmosis_rollout.context import RolloutContext, RolloutProgress
from osmosis_rollout.rollout_notes import RolloutNotes, notes_for
from osmosis_rollout.types import (
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    RolloutErrorCategory,
    RolloutStatus,
)

if TYPE_CHECKING:
    from osmosis_rollout.trajectory.save import WriteFailureCallback

logger = logging.getLogger(__name__)

PHASE_WORKFLOW, PHASE_GRADER = "workflow", "grader"

# Trajectories within these bounds are written on the rollouts' loop (see _small).
_INLINE_MAX_MESSAGES = 64
_INLINE_MAX_CHARS = 64 * 1024


@dataclass(kw_only=True)
class ExecutedRollout:
    """One finished in-process rollout."""

    rollout_id: str
    result: ExecutionResult
    """The result to report (the grader's when it ran, else the workflow's)."""
    trajectory: Path | None = None
    """``trajectory.json`` when one was saved."""
    diagnostics: Path | None = None
    """``diagnostics.json`` when one was saved (the saved result had ``extra_fields``)."""
    notes: RolloutNotes | None = None
    """What the rollout logged and its judge said (filled while :func:`taking_notes` is on)."""

    @property
    def phase(self) -> str | None:
        """``"workflow"`` or ``"grader"`` when user code in that phase failed, else ``None``."""
        phase = (self.result.extra_fields or {}).get("phase")
        if self.result.status is RolloutStatus.SUCCESS or not isinstance(phase, str):
            return None
        return phase

    def wire_notes(self) -> dict[str, str] | None:
        """What a served result carries beyond the official one, under its ``notes`` key
        (an additive key the official controller's model ignores): the grader's reason, and
        for a failure in user code its ``phase``, ``where`` (the user's frame) and
        ``traceback`` (user frames only). None when there is nothing to say."""
        notes: dict[str, str] = {}
        reason = self.notes.grader_reason() if self.notes is not None else ""
        if reason:
            notes["grader_reason"] = reason
        if self.result.status is not RolloutStatus.SUCCESS:
            extra = self.result.extra_fields or {}
            for key in ("phase", "where", "traceback"):
                value = extra.get(key)
                if isinstance(value, str):
                    notes[key] = value
        return notes or None


def _escaped_failure(exc: BaseException, phase: str) -> ExecutionResult:
    """The result for a ``BaseException`` (``SystemExit``, ...) raised by user code in ``phase``."""
    name = type(exc).__name__
    what = f"{name}: {exc}" if str(exc) else name
    return ExecutionResult(
        status=RolloutStatus.FAILURE,
        err_message=f"{what} raised by the {phase}",
        err_category=RolloutErrorCategory.AGENT_ERROR,
        extra_fields={"phase": phase, "exception_type": name, **user_error_fields(exc)},
    )


async def _save_trajectory(
    root: Path,
    request: ExecutionRequest,
    result: ExecutionResult,
    extra_fields: Mapping[str, Any] | None,
    policy_key: str | None,
    secrets: Mapping[str, str | None] | None,
    on_write_failure: WriteFailureCallback | None = None,
) -> tuple[Path | None, Path | None]:
    """Save ``result``'s files; return the paths of its trajectory and diagnostics."""
    from osmosis_rollout.redaction import environment_redactor
    from osmosis_rollout.trajectory import write_trajectory
    from osmosis_rollout.trajectory.save import DIAGNOSTICS_FILENAME

    # The key the rollout called its policy with is as secret as the environment's keys.
    # Shared between rollouts while the environment's secrets stay the same.
    redactor = environment_redactor(extra={**(secrets or {}), "POLICY_API_KEY": policy_key})

    save = functools.partial(
        write_trajectory,
        root,
        request.id,
        result,
        label=request.label,
        metadata=request.metadata,
        extra_fields=extra_fields,
        diagnostics=result.extra_fields,
        redactor=redactor,
        on_write_failure=on_write_failure,
    )
    if _small(result):
        # A few messages take tens of microseconds to write: less than the hop to a thread
        # and back, which on a busy machine also waits for the GIL twice.
        trajectory = save()
    else:
        # Off the loop: a large trajectory must not stall the other rollouts sharing it.
        trajectory = await asyncio.to_thread(save)
    diagnostics = None
    if result.extra_fields is not None:
        # Written whenever there are extra fields, unless the write failed: look.
        candidate = root / request.id / DIAGNOSTICS_FILENAME
        diagnostics = candidate if candidate.is_file() else None
    return trajectory, diagnostics


def _small(result: ExecutionResult) -> bool:
    """Whether ``result``'s files are cheap enough to write on the loop (a rough size bound).

    Plain-text messages and tool-call arguments are counted; content parts (images, files)
    and anything unusual send the write to a thread, where its real cost cannot stall the
    rollouts sharing the loop.
    """
    if result.extra_fields and len(result.extra_fields) > _INLINE_MAX_MESSAGES:
        return False
    sample = result.sample
    messages = sample.trajectory_messages if sample is not None else None
    if not messages:
        return True
    if len(messages) > _INLINE_MAX_MESSAGES:
        return False
    chars = 0
    for message in messages:
        if not isinstance(message, dict):
            return False
        content = message.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif content is not None:
            return False
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            arguments = function.get("arguments") if isinstance(function, dict) else None
            if not isinstance(arguments, str):
                return False
            chars += len(arguments)
    return chars <= _INLINE_MAX_CHARS


async def execute_in_process(
    backend: ExecutionBackend,
    request: ExecutionRequest,
    context: RolloutContext,
    *,
    trajectory_root: Path | None = None,
    trajectory_extra_fields: Mapping[str, Any] | None = None,
    secrets: Mapping[str, str | None] | None = None,
    on_write_failure: WriteFailureCallback | None = None,
) -> ExecutedRollout:
    """Run ``request`` through ``backend`` with ``context`` current; never raises but cancellation.

    ``context`` gets a :class:`RolloutProgress` when it has none (the phase of a failure is
    read from it); what the rollout logs and its judge says go to the result's ``notes``.
    With ``trajectory_root``, the outcome's ``result_to_save`` is archived under
    ``<trajectory_root>/<request.id>/`` before this returns (so the trajectory exists before
    the result is visible); an ``execute`` that raised archives nothing.
    ``trajectory_extra_fields`` go to its ``extra.osmosis`` (the request's ``extra_fields``).
    It is redacted of the environment's secrets, the context's key and ``secrets`` (name ->
    value: a server's inbound key, say); a file that cannot be written is logged, or handed
    to ``on_write_failure`` (see :func:`~osmosis_rollout.trajectory.save_trajectory`).
    """
    if context.progress is None:
        context.progress = RolloutProgress()
    progress = context.progress
    notes = RolloutNotes()
    outcome: ExecutionOutcome | None = None
    try:
        with context, notes_for(notes, progress):
            outcome = await backend.execute(request)
        result = outcome.result
        logger.info("rollout %s finished with status %s", request.id, result.status)
    except (asyncio.CancelledError, GeneratorExit):
        # Our caller cancelled, or the coroutine is being closed: neither is the rollout's.
        raise
    except Exception as exc:
        logger.error("rollout %s: execute() raised", request.id, exc_info=True)
        result = ExecutionResult(
            status=RolloutStatus.FAILURE,
            err_message=str(exc) or "Internal server error",
            err_category=categorize_exception(exc),
            extra_fields=user_error_fields(exc),
        )
    except BaseException as exc:
        phase = PHASE_GRADER if progress.status is RolloutStatus.GRADING else PHASE_WORKFLOW
        logger.error("rollout %s: the %s raised %r", request.id, phase, exc, exc_info=True)
        result = _escaped_failure(exc, phase)
    trajectory = diagnostics = None
    if outcome is not None and trajectory_root is not None:
        trajectory, diagnostics = await _save_trajectory(
            trajectory_root,
            request,
            outcome.result_to_save,
            trajectory_extra_fields,
            context.api_key,
            secrets,
            on_write_failure,
        )
    return ExecutedRollout(
        rollout_id=request.id,
        result=result,
        trajectory=trajectory,
        diagnostics=diagnostics,
        notes=notes,
    )


__all__ = ["PHASE_GRADER", "PHASE_WORKFLOW", "ExecutedRollout", "execute_in_process"]
