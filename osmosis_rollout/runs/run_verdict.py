"""The run's verdict: passed, failed or incomplete, with every reason, decided in one place.

:func:`decide` reads what the run's end knows (the rows' counts and how the run ended, each
gate's line and outcome, pytest's failures that are not rows, the files that could not be
written) and returns one :class:`~osmosis_rollout.runs.report_model.RunVerdict`. Every
output reads that object and nothing else: the exit status (:attr:`RunVerdict.exit_status`),
pytest's own counts and JUnit (each gate is a test case,
:mod:`pytest_osmosis.results.gate_cases`), ``report.json``'s ``verdict``, the HTML banner and
the markdown summary (:mod:`pytest_osmosis.results.markdown`); a report rebuilt from a run
folder (:func:`osmosis_rollout.runs.report.rebuild_report`) decides it here too, from its
rows and how the run ended (its gates are not applied again).

With a pass-rate gate (``--osmosis-min-pass-rate``) the gate decides: a row below the
threshold is an expected failure (pytest's ``xfailed``) that the gate counts, and the rows'
reason is ``tolerated``; without one, any failed row fails the run, as pytest always does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from osmosis_rollout.runs.report_model import RunVerdict, VerdictReason

__all__ = [
    "EXIT_INTERRUPTED",
    "EXIT_WRITE_FAILED",
    "GATE_PREFIXES",
    "decide",
    "failed_parts",
    "gate_name",
    "rows_line",
]

EXIT_INTERRUPTED = 2
"""pytest's own status for an interrupted run (``pytest.ExitCode.INTERRUPTED``)."""
EXIT_WRITE_FAILED = 12
"""A run whose journal or report could not be written (a full disk). pytest's own statuses
run from 0 to 6; this leaves room for more of theirs, and neither 0 nor 1 may stand for a
result that is not on disk."""

GATE_PREFIXES = (
    ("gate: ", "min-pass-rate"),
    ("baseline gate: ", "regression"),
    ("require-grader: ", "require-grader"),
)
"""How a gate's line (:class:`~pytest_osmosis.results.gates.GateResult` ``verdicts``) names it."""


_RANK = {"incomplete": 0, "failed": 1, "tolerated": 2, "passed": 3}


def gate_name(line: str) -> str:
    """``min-pass-rate`` for ``gate: pass rate ...``; the name of a gate's test case."""
    for prefix, name in GATE_PREFIXES:
        if line.startswith(prefix):
            return name
    head = line.split(":", 1)[0].strip().lower()
    return "-".join(head.split()) or "gate"


def failed_parts(failed: int, errored: int) -> str:
    """What ``failed`` is made of, in the words the summary, the HTML cards and the schema
    share: ``2 errored, 8 below threshold`` (a part that is 0 is left out).

    ``errored``: a rollout failed (no reward); ``below threshold``: every rollout ran, and the
    rewards missed the pass threshold (or the row-pass rule).
    """
    parts = [f"{errored} errored"] if errored else []
    if failed - errored:
        parts.append(f"{failed - errored} below threshold")
    return ", ".join(parts)


def rows_line(rows: dict[str, Any]) -> str:
    """``rows: 21 passed, 6 failed (6 below threshold)``, with skipped and not-run rows."""
    failed = int(rows.get("failed", 0))
    line = f"rows: {rows.get('passed', 0)} passed, {failed} failed"
    if failed:
        line += f" ({failed_parts(failed, int(rows.get('errored', 0)))})"
    if rows.get("skipped"):
        line += f", {rows['skipped']} skipped"
    if rows.get("not_run"):
        line += f", {rows['not_run']} not run"
    return line


def decide(
    summary: dict[str, Any],
    *,
    gates: Sequence[tuple[str, bool]],
    gated: bool,
    other_failures: int = 0,
    disk: Sequence[str] = (),
) -> RunVerdict:
    """The run's verdict.

    ``summary`` is the report's (its ``rows`` counts, ``complete``, ``interrupted``,
    ``stopped_by``); ``gates`` each gate's ``(line, passed)``; ``gated``: a pass-rate gate
    judges the rows (their misses are tolerated, the gate decides); ``other_failures``:
    pytest's failed items that are not rows (preflight checks, the user's own tests);
    ``disk``: one line per run file that could not be written.
    """
    rows = summary.get("rows") or {}
    reasons: list[VerdictReason] = []
    total = int(rows.get("total", 0)) + int(rows.get("not_run", 0))
    stopped = summary.get("stopped_by")
    if summary.get("complete") is False:
        interrupted = bool(summary.get("interrupted"))
        what = f"interrupted by {stopped}" if interrupted else f"stopped by {stopped or 'pytest'}"
        reasons.append(
            VerdictReason(
                kind="interruption" if interrupted else "stopped",
                name=str(stopped or "stopped"),
                outcome="incomplete",
                line=f"{what}: {rows.get('not_run', 0)} of {total} rows not run",
            )
        )
    failed_rows = int(rows.get("failed", 0))
    reasons.append(
        VerdictReason(
            kind="rows",
            name="rows",
            outcome="passed" if not failed_rows else "tolerated" if gated else "failed",
            line=rows_line(rows)
            + (", counted by the pass-rate gate" if failed_rows and gated else ""),
        )
    )
    for line, passed in gates:
        reasons.append(
            VerdictReason(
                kind="gate",
                name=gate_name(line),
                outcome="passed" if passed else "failed",
                line=line,
            )
        )
    if other_failures > 0:
        many = other_failures != 1
        reasons.append(
            VerdictReason(
                kind="tests",
                name="tests",
                outcome="failed",
                line=f"tests: {other_failures} other test{'s' if many else ''} failed "
                "(a preflight check or a test of your own)",
            )
        )
    reasons.extend(
        VerdictReason(kind="disk", name="disk", outcome="failed", line=line) for line in disk
    )
    reasons.sort(key=lambda reason: _RANK[reason.outcome])
    outcomes = {reason.outcome for reason in reasons}
    outcome: Literal["passed", "failed", "incomplete"] = (
        "incomplete" if "incomplete" in outcomes else "failed" if "failed" in outcomes else "passed"
    )
    return RunVerdict(outcome=outcome, exit_status=_exit_status(outcome, reasons), reasons=reasons)


def _exit_status(outcome: str, reasons: list[VerdictReason]) -> int:
    """0 passed; 12 when a run file is missing (the outcome is not on disk); 2 interrupted
    by a signal; 1 otherwise (failed, or stopped by -x/--maxfail)."""
    kinds = {reason.kind for reason in reasons if reason.outcome != "passed"}
    if "disk" in kinds:
        return EXIT_WRITE_FAILED
    if "interruption" in kinds:
        return EXIT_INTERRUPTED
    return 0 if outcome == "passed" else 1
