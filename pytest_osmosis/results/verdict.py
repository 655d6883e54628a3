"""One attempt's result, a row's verdict over its attempts, and the failure message a person reads."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from osmosis_rollout.runs.metrics import row_stats
from pytest_osmosis.options import RowPassRule

if TYPE_CHECKING:
    from osmosis_rollout.runs.journal import JournalRow

STATUS_SUCCESS, STATUS_FAILED, STATUS_SKIPPED = "success", "failed", "skipped"


@dataclass
class AttemptResult:
    """One rollout of one row, classified as the official ``osmosis eval run`` classifies it.

    ``status`` is ``success`` | ``failed`` | ``skipped`` (the grader removed the sample);
    ``error_type`` is the error category, else the message, else ``rollout_failed``.
    """

    row_key: str
    row_index: int
    source_row_index: int
    run_index: int
    rollout_id: str
    status: str
    reward: float | None
    error_type: str | None = None
    err_message: str | None = None
    tokens: int | None = None
    tokens_estimated: bool = False
    cost_usd: float | None = None
    cost_estimated: bool = False
    duration_ms: float = 0.0
    started_at: float = 0.0
    trajectory_path: str | None = None
    diagnostics_path: str | None = None
    last_assistant: str | None = None
    tool_calls: list[str] | None = None
    """The tool calls of the sample, one ``name({arguments})`` line each, clipped and bounded
    (:func:`pytest_osmosis.run.attempts.tool_call_lines`); None when it made none."""
    policy_calls: int = 0
    error_phase: str | None = None
    """``workflow`` or ``grader`` when user code in that phase failed an in-process rollout."""
    blocked_loop: str | None = None
    """What blocked the rollout loop while this attempt was in flight, when it failed."""
    passed: bool = False
    grader: dict[str, Any] | None = None
    """What the grader said of this attempt: ``reason`` (its log lines and each judge's
    explanation, see :mod:`osmosis_rollout.rollout_notes`) and the sample's ``metrics``."""
    workflow_log: str | None = None
    """What the workflow logged, kept when the attempt errored."""
    prompt: str | None = None
    """The row's task (its first user message, clipped), kept on an errored attempt: such a
    rollout may have left no trajectory to read it from."""
    printed: str | None = None
    """What the rollout printed (in-process), its first lines: the failure's "Captured
    rollout output" section (:mod:`pytest_osmosis.run.rollout_log`)."""
    ungraded: str | None = None
    """Why a rollout that ran has no reward: ``no_grader`` (the rollout defines none),
    ``no_label`` (the row has neither ground_truth nor metadata) or ``not_graded``."""

    def index_row(self, nodeid: str, dataset: str) -> dict[str, Any]:
        """The report row: the official ``index.jsonl`` keys plus ours (``nodeid``, ...)."""
        row = {name: getattr(self, name) for name in _ATTEMPT_FIELDS}  # flat: no deep copy
        row["trajectory_filename"] = row.pop("trajectory_path")
        row["nodeid"] = nodeid
        row["dataset"] = dataset
        return row


_ATTEMPT_FIELDS = tuple(f.name for f in fields(AttemptResult))
"""The report row's keys, in order (``dataclasses.fields`` builds its tuple on every call)."""


def classify(
    status: str,
    reward: float | None,
    remove_sample: bool,
    err_category: str | None,
    err_message: str | None,
) -> tuple[str, float | None, str | None]:
    """Map a wire result onto ``(status, reward, error_type)`` like the official eval.

    A failure with neither category nor message is the backend's "the grader did not run"
    (no Grader, or a row with neither label nor metadata): the rollout ran, and is an
    ungraded success with no reward.
    """
    if status != "success":
        if err_category is None and err_message is None:
            return STATUS_SUCCESS, None, None
        return STATUS_FAILED, None, err_category or err_message or "rollout_failed"
    if remove_sample:
        return STATUS_SKIPPED, None, None
    return STATUS_SUCCESS, reward, None


def attempt_passes(
    result: AttemptResult, threshold: float, *, ungraded_passes: bool = False
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


@dataclass
class RowVerdict:
    """The verdict for one row over its attempts."""

    outcome: str  # "passed" | "failed" | "skipped"
    attempts: list[AttemptResult] = field(default_factory=list)
    passed_attempts: int = 0
    scored_attempts: int = 0
    record: JournalRow | None = field(default=None, compare=False, repr=False)
    """The row's record as it was journaled where the row finished
    (:func:`pytest_osmosis.results.report.row_record`), for its report to reuse; None when it was
    not journaled there or no longer matches the attempts."""

    def stats(self) -> dict[str, Any]:
        """The row's statistics for the report (:func:`osmosis_rollout.runs.metrics.row_stats`)."""
        stats = row_stats(
            [a.reward for a in self.attempts],
            [None if a.status == STATUS_SKIPPED else a.passed for a in self.attempts],
        )
        costs = [a.cost_usd for a in self.attempts if a.cost_usd is not None]
        if costs:
            stats["cost_usd"] = sum(costs)
        return stats


def row_verdict(
    attempts: list[AttemptResult],
    threshold: float,
    rule: RowPassRule,
    *,
    ungraded_passes: bool = False,
) -> RowVerdict:
    """Apply the threshold to each attempt and ``rule`` to the row (skipped attempts do not count).

    ``ungraded_passes``: an attempt no grader scored passes (the user set no threshold).
    """
    for attempt in attempts:
        attempt.passed = attempt_passes(attempt, threshold, ungraded_passes=ungraded_passes)
    scored = [a for a in attempts if a.status != STATUS_SKIPPED]
    passed = sum(1 for a in scored if a.passed)
    if not scored:
        return RowVerdict("skipped", attempts, 0, 0)
    outcome = "passed" if rule.passes(passed, len(scored)) else "failed"
    return RowVerdict(outcome, attempts, passed, len(scored))


def _clip(text: str | None, limit: int = 400) -> str:
    if text is None:
        return "(none)"
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def failure_message(
    *,
    row_desc: str,
    verdict: RowVerdict,
    threshold: float,
    rule: RowPassRule,
    label: str | None,
    log_path: str | None = None,
    rerun: str | None = None,
    prompt: str | None = None,
) -> str:
    """The text of a failed row: what was expected, what happened, where to look, how to fix.

    ``log_path`` is where tracebacks of in-process user code go (``rollouts.log``);
    ``rerun`` the command that runs just this row; ``prompt`` the row's task (its first
    lines are shown).
    """
    lines: list[str] = []
    attempts = verdict.attempts
    if len(attempts) == 1:
        a = attempts[0]
        if a.status == STATUS_FAILED:
            lines.append(f"{row_desc}: {_what_failed(a)}: {_clip(a.err_message, 800)}")
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
            elif a.status == STATUS_SKIPPED:
                detail = "skipped (sample removed)"
            else:
                detail = f"reward {a.reward if a.reward is None else format(a.reward, 'g')}"
            lines.append(f"  attempt {a.run_index}: {detail}")
    if rerun:
        lines.append(f"  rerun: {rerun}")
    if prompt and prompt.strip():
        lines.extend(_indented("prompt", _first_lines(prompt)))
    # Show the first attempt that missed (not merely the last one, which may have passed).
    shown = next((a for a in attempts if not a.passed), attempts[-1] if attempts else None)
    which = f" (attempt {shown.run_index})" if shown is not None and len(attempts) > 1 else ""
    if shown is not None and shown.tool_calls:
        lines.append(f"  tool calls{which}:")
        lines.extend(f"    {call}" for call in shown.tool_calls)
    if shown is not None:
        lines.append(f"  last assistant message{which}: {_clip(shown.last_assistant)}")
    lines.append(f"  label: {_clip(label)}")
    if shown is not None:
        lines.extend(_said(shown))
        lines.append(f"  rollout id: {shown.rollout_id}")
        if shown.trajectory_path:
            lines.append(f"  trajectory: {shown.trajectory_path}")
        if shown.diagnostics_path:
            lines.append(f"  diagnostics: {shown.diagnostics_path}")
        if log_path and shown.error_phase and shown.error_type != "timeout":
            lines.append(f"  {shown.error_phase} traceback: {log_path}")
        if shown.blocked_loop:
            lines.append(f"  blocked loop: {shown.blocked_loop}")
    lines.append(_hint(verdict, rerun=bool(rerun)))
    return "\n".join(lines)


PROMPT_LINES = 5
"""Lines of the row's prompt a failure shows (each clipped); the dataset has all of it."""


def _first_lines(text: str, limit: int = PROMPT_LINES) -> list[str]:
    """The first ``limit`` non-blank lines of ``text``, each clipped, and how many were left."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    shown = [_clip(line, 200) for line in lines[:limit]]
    if len(lines) > limit:
        shown.append(f"... ({len(lines) - limit} more lines)")
    return shown


def _indented(title: str, lines: list[str]) -> list[str]:
    """``  title: first`` then the rest aligned under it."""
    if not lines:
        return []
    pad = " " * (len(title) + 4)
    return [f"  {title}: {lines[0]}", *(pad + line for line in lines[1:])]


SAID_LIMIT = 2048
"""Characters of the grader's reason (or an errored workflow's log) a failure shows; the
report files keep all of it."""


def _said(attempt: AttemptResult) -> list[str]:
    """The grader's reason and metrics, or an errored workflow's log, indented under the row."""
    lines: list[str] = []
    said = attempt.grader or {}
    if said.get("reason"):
        lines.append("  grader said:")
        lines.extend(f"    {line}" for line in _clip(said["reason"], SAID_LIMIT).splitlines())
    if said.get("metrics"):
        lines.append(f"  metrics: {_clip(json.dumps(said['metrics'], default=str), 400)}")
    if attempt.workflow_log:
        lines.append("  workflow logged:")
        lines.extend(f"    {line}" for line in _clip(attempt.workflow_log, SAID_LIMIT).splitlines())
    return lines


def _what_failed(attempt: AttemptResult, *, short: bool = False) -> str:
    """``rollout failed [type]``, or ``the grader failed [type]`` when the grader raised."""
    if attempt.error_phase == "grader":
        return f"{'grader' if short else 'the grader'} failed [{attempt.error_type}]"
    return f"{'' if short else 'rollout '}failed [{attempt.error_type}]"


def _hint(verdict: RowVerdict, *, rerun: bool = False) -> str:
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
