"""A row's verdict over its attempts, decided once, and the failure message a person reads.

:func:`decide_row` makes the row's one record: its journal line, its test report and every
report file carry it.
"""

from __future__ import annotations

import json
import math

from osmosis_rollout.runs.metrics import row_stats
from osmosis_rollout.runs.report_model import AttemptRecord, RowRecord
from pytest_osmosis.options import RowPassRule

STATUS_SUCCESS, STATUS_FAILED, STATUS_SKIPPED = "success", "failed", "skipped"


def classify(
    status: str,
    reward: float | None,
    remove_sample: bool,
    err_category: str | None,
    err_message: str | None,
) -> tuple[str, float | None, str | None]:
    """Map a wire result onto ``(status, reward, error_type)`` like the official eval. A failure
    with neither category nor message is the backend's "the grader did not run": the rollout
    ran, an ungraded success with no reward."""
    if status != "success":
        if err_category is None and err_message is None:
            return STATUS_SUCCESS, None, None
        return STATUS_FAILED, None, err_category or err_message or "rollout_failed"
    if remove_sample:
        return STATUS_SKIPPED, None, None
    return STATUS_SUCCESS, reward, None


def attempt_passes(
    result: AttemptRecord, threshold: float, *, ungraded_passes: bool = False
) -> bool:
    """Reward >= threshold on a non-skipped attempt; an ungraded one passes iff ``ungraded_passes``."""
    if result.status == STATUS_SUCCESS and result.reward is None:
        return ungraded_passes
    return (
        result.status != STATUS_SKIPPED
        and result.reward is not None
        and math.isfinite(result.reward)
        and result.reward >= threshold
    )


def decide_row(
    identity: tuple[str, str | None, str],
    attempts: list[AttemptRecord],
    threshold: float,
    rule: RowPassRule,
    *,
    ungraded_passes: bool = False,
) -> RowRecord:
    """The row's record: the threshold applied to each attempt, ``rule`` to the row (skipped
    attempts do not count), and its statistics. ``identity`` is ``(nodeid, dataset, row_key)``."""
    for attempt in attempts:
        attempt.passed = attempt_passes(attempt, threshold, ungraded_passes=ungraded_passes)
        if attempt.passed:
            attempt.workflow_log = None  # nothing to explain; the record stays small
    scored = [a for a in attempts if a.status != STATUS_SKIPPED]
    passed = sum(1 for a in scored if a.passed)
    outcome = (
        "skipped" if not scored else "passed" if rule.passes(passed, len(scored)) else "failed"
    )
    stats = row_stats(
        [a.reward for a in attempts],
        [None if a.status == STATUS_SKIPPED else a.passed for a in attempts],
    )
    costs = [a.cost_usd for a in attempts if a.cost_usd is not None]
    if costs:
        stats["cost_usd"] = sum(costs)
    nodeid, dataset, row_key = identity
    return RowRecord(
        nodeid=nodeid,
        dataset=dataset,
        row_key=row_key,
        verdict=outcome,
        attempts=attempts,
        stats=stats,
    )


class VerdictHookError(Exception):
    """A ``pytest_osmosis_row_verdict`` hook returned something that is not a verdict."""


def hook_outcome(decided: object) -> str:
    """``True``/``"passed"``, ``False``/``"failed"`` or ``"skipped"``; anything else is a mistake."""
    if isinstance(decided, bool):
        return "passed" if decided else "failed"
    if decided in ("passed", "failed", "skipped"):
        return str(decided)
    raise VerdictHookError(
        f"pytest_osmosis_row_verdict returned {decided!r}; return True/'passed', "
        "False/'failed', 'skipped', or None to keep the built-in verdict"
    )


def _clip(text: str | None, limit: int = 400) -> str:
    if text is None:
        return "(none)"
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def failure_message(
    *,
    row_desc: str,
    verdict: RowRecord,
    threshold: float,
    rule: RowPassRule,
    label: str | None,
    log_path: str | None = None,
    rerun: str | None = None,
    prompt: str | None = None,
) -> str:
    """The text of a failed row: what was expected, what happened, where to look, how to fix.
    ``log_path``: where in-process tracebacks go (``rollouts.log``); ``rerun``: the command
    that runs just this row; ``prompt``: the row's task (its first lines are shown)."""
    lines: list[str] = []
    attempts = verdict.attempts
    if len(attempts) == 1:
        a = attempts[0]
        if a.status == STATUS_FAILED:
            lines.append(f"{row_desc}: {_what_failed(a)}: {_clip(a.err_message, 800)}")
            if a.error_where:
                lines.append(f"  raised at: {a.error_where}")
        else:
            reward = "none" if a.reward is None else f"{a.reward:g}"
            lines.append(f"{row_desc}: reward {reward} < threshold {threshold:g}")
    else:
        lines.append(
            f"{row_desc}: {verdict.passed_attempts}/{verdict.scored_attempts} attempts reached "
            f"reward >= {threshold:g}; rule {rule.describe()} not met"
        )
        for a in attempts:
            if a.status == STATUS_FAILED:
                detail = f"{_what_failed(a, short=True)}: {_clip(a.err_message, 200)}"
                if a.error_where:
                    detail += f" (at {a.error_where})"
            elif a.status == STATUS_SKIPPED:
                detail = "skipped (sample removed)"
            else:
                detail = f"reward {a.reward if a.reward is None else format(a.reward, 'g')}"
            lines.append(f"  attempt {a.run_index}: {detail}")
    if rerun:
        lines.append(f"  rerun: {rerun}")
    if prompt and prompt.strip():
        lines.extend(_prompt_lines(prompt))
    # Show the first attempt that missed (not merely the last one, which may have passed);
    # a row has at least one attempt.
    shown = next((a for a in attempts if not a.passed), attempts[-1])
    which = f" (attempt {shown.run_index})" if len(attempts) > 1 else ""
    if shown.tool_calls:
        lines.append(f"  tool calls{which}:")
        lines.extend(f"    {call}" for call in shown.tool_calls)
    lines.append(f"  last assistant message{which}: {_clip(shown.last_assistant)}")
    lines.append(f"  label: {_clip(label)}")
    lines.extend(_said(shown))
    lines.append(f"  rollout id: {shown.rollout_id}")
    if shown.trajectory_filename:
        lines.append(f"  trajectory: {shown.trajectory_filename}")
    if shown.diagnostics_path:
        lines.append(f"  diagnostics: {shown.diagnostics_path}")
    lines.extend(_traceback_lines(shown, log_path))
    if shown.blocked_loop:
        lines.append(f"  blocked loop: {shown.blocked_loop}")
    lines.append(_hint(verdict, rerun=bool(rerun)))
    return "\n".join(lines)


PROMPT_LINES = 5
"""Lines of the row's prompt a failure shows (each clipped); the dataset has all of it."""


def _prompt_lines(prompt: str) -> list[str]:
    """``  prompt: first line``, the next ones aligned under it, and how many were left."""
    lines = [line for line in prompt.strip().splitlines() if line.strip()]
    shown = [_clip(line, 200) for line in lines[:PROMPT_LINES]]
    if len(lines) > PROMPT_LINES:
        shown.append(f"... ({len(lines) - PROMPT_LINES} more lines)")
    return [f"  prompt: {shown[0]}", *(" " * 10 + line for line in shown[1:])]


SAID_LIMIT = 2048
"""Characters of the grader's reason (or a workflow's log) a failure shows; reports keep all."""


def _said(attempt: AttemptRecord) -> list[str]:
    """The grader's reason and metrics, or an errored workflow's log, indented under the row."""
    lines: list[str] = []
    said = attempt.grader
    if said is not None and said.reason:
        lines.append("  grader said:")
        lines.extend(f"    {line}" for line in _clip(said.reason, SAID_LIMIT).splitlines())
    if said is not None and said.metrics:
        lines.append(f"  metrics: {_clip(json.dumps(said.metrics, default=str), 400)}")
    if attempt.workflow_log:
        lines.append("  workflow logged:")
        lines.extend(f"    {line}" for line in _clip(attempt.workflow_log, SAID_LIMIT).splitlines())
    return lines


TRACEBACK_LINES = 20
"""Lines of an error's short traceback a failure shows (it holds at most six user frames)."""


def _traceback_lines(attempt: AttemptRecord, log_path: str | None) -> list[str]:
    """The attempt's short traceback (user frames only), and where the full one is."""
    if attempt.status != STATUS_FAILED or attempt.error_type == "timeout":
        return []
    phase = attempt.error_phase or "rollout"
    lines: list[str] = []
    text = attempt.error_traceback or ""
    if "\n" in text:  # more than the exception line, which the failure's first line says
        body = text.splitlines()
        if len(body) > TRACEBACK_LINES:
            more = len(body) - TRACEBACK_LINES + 1
            body = [*body[: TRACEBACK_LINES - 1], f"... {more} more lines"]
        lines.append(f"  {phase} traceback, your code:")
        lines.extend(f"    {line}" for line in body)
    if log_path and attempt.error_phase in ("workflow", "grader"):  # those are logged in full
        lines.append(f"  {phase} traceback: {log_path}")
    return lines


def _what_failed(attempt: AttemptRecord, *, short: bool = False) -> str:
    """``rollout failed [type]``, or ``the grader failed [type]`` when the grader raised."""
    if attempt.error_phase == "grader":
        return f"{'grader' if short else 'the grader'} failed [{attempt.error_type}]"
    return f"{'' if short else 'rollout '}failed [{attempt.error_type}]"


def _hint(verdict: RowRecord, *, rerun: bool = False) -> str:
    errors = {a.error_type for a in verdict.attempts if a.status == STATUS_FAILED}
    if any(a.blocked_loop for a in verdict.attempts):
        return (
            "  fix: blocking code in an async function stalls every rollout on the shared loop; "
            "await an async API there (asyncio.sleep, httpx.AsyncClient), or make run/grade a "
            "plain def (it then runs in a worker thread)"
        )
    if any(a.status == STATUS_SUCCESS and a.reward is None for a in verdict.attempts):
        return (
            "  fix: no grader ran (the rollout has no Grader, or the row no ground_truth/metadata): "
            "add a Grader, or set no pass threshold to let ungraded rows pass"
        )
    if "timeout" in errors:
        return "  fix: raise --osmosis-agent-timeout / --osmosis-grader-timeout, or make the workflow faster"
    if "cassette_miss" in errors:
        return (
            "  fix: the request changed since it was recorded; re-record this row with "
            "--osmosis-record-mode new_episodes (or all) and a model"
        )
    again = "with the rerun command above" if rerun else "with -k"
    if errors:
        return f"  fix: see the error above (and the diagnostics/trajectory file); rerun just this row {again}"
    return f"  fix: compare the last assistant message with the label; rerun just this row {again}"
