"""Suite gates: the minimum pass rate and the comparison with a baseline report.

Without ``--osmosis-min-pass-rate`` any failed row fails the run, as pytest always does.
With it, the run passes when the row pass rate is at or above the gate even though some
rows missed (they stay failed in the summary and the report), and fails below it.

With ``--osmosis-gate-confidence C`` the gate is three-way, decided on an interval at ``C``
(:mod:`osmosis_rollout.runs.gating`): passed when its lower bound reaches the threshold, failed
when its upper bound is below it, otherwise undecided, which fails the run unless
``--osmosis-gate-undecided pass``. The paired regression test against a baseline is always
reported; with a confidence, ``--osmosis-fail-on-regression`` fails the run only on a
significant regression (the changed rows are still listed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.runs.gating import (
    GateDecision,
    RegressionTest,
    RowCounts,
    attempts_gate,
    regression_test,
    rows_gate,
    rule_gate,
)
from osmosis_rollout.runs.report_model import ReportFileError, read_report
from pytest_osmosis.options import OsmosisSettings
from pytest_osmosis.results.report import RunReport


def _row_rewards(attempts: list[dict[str, Any]]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for a in attempts:
        if a.get("reward") is not None:
            sums.setdefault(a["nodeid"], []).append(float(a["reward"]))
    return {k: sum(v) / len(v) for k, v in sums.items()}


def load_baseline(path: Path, *, allow_partial: bool = False) -> dict[str, Any]:
    """Read a previous JSON report; a clear ``UsageError`` when it is missing or not a report.

    The report of an incomplete run (interrupted, ``-x``, ``--maxfail``) is refused unless
    ``allow_partial``: its missing rows would all look new, and its pass rate is not the suite's.
    """
    try:
        document = read_report(path).model_dump(by_alias=True)
    except ReportFileError as exc:
        raise pytest.UsageError(f"--osmosis-baseline: {exc}") from None
    summary = document.get("summary")
    if isinstance(summary, dict) and summary.get("complete") is False and not allow_partial:
        raise pytest.UsageError(
            f"--osmosis-baseline: {path} is the report of an incomplete run "
            f"({_incompleteness(summary)}); compare with a complete run's report, or pass "
            "--osmosis-allow-partial-baseline to accept it"
        )
    return document


def _answers(report: dict[str, Any], nodeids: list[str]) -> dict[str, str]:
    """The last answer each of ``nodeids`` gave in ``report`` (its first attempt with one)."""
    wanted, answers = set(nodeids), {}
    for attempt in report.get("rows", []):
        nodeid = attempt.get("nodeid")
        if nodeid in wanted and nodeid not in answers and attempt.get("last_assistant"):
            answers[nodeid] = str(attempt["last_assistant"])
    return answers


def _incompleteness(summary: dict[str, Any]) -> str:
    """``stopped by -x, 3 rows not run`` for a report's summary."""
    parts = []
    if summary.get("stopped_by"):
        parts.append(f"stopped by {summary['stopped_by']}")
    rows = summary.get("rows")
    not_run = rows.get("not_run") if isinstance(rows, dict) else summary.get("not_run")
    if not_run:
        parts.append(f"{not_run} rows not run")
    return ", ".join(parts) or "incomplete"


def compare(baseline: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """Row-by-row differences between two reports, keyed by the stable item id."""
    before = {r["nodeid"]: r["verdict"] for r in baseline.get("row_verdicts", [])}
    after = {r["nodeid"]: r["verdict"] for r in current["row_verdicts"]}
    rewards_before = _row_rewards(baseline.get("rows", []))
    rewards_after = _row_rewards(current["rows"])
    regressed = sorted(k for k in after if before.get(k) == "passed" and after[k] == "failed")
    improved = sorted(k for k in after if before.get(k) == "failed" and after[k] == "passed")
    new = sorted(k for k in after if k not in before)
    gone = sorted(k for k in before if k not in after)
    deltas = {
        k: round(rewards_after[k] - rewards_before[k], 6)
        for k in sorted(after)
        if k in rewards_after and k in rewards_before and rewards_after[k] != rewards_before[k]
    }
    return {
        "regressed": regressed,
        "improved": improved,
        "new": new,
        "gone": gone,
        "reward_deltas": deltas,
    }


@dataclass
class GateResult:
    """What the gates decided: report extras, summary lines, verdicts and the exit status to force."""

    extra: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    """The baseline comparison, printed with the summary."""
    exit_override: int | None = None
    verdicts: list[tuple[str, bool]] = field(default_factory=list)
    """``(line, passed)`` per gate, printed last, just before pytest's own summary."""


def row_counts(stats: dict[str, Any], verdict: str) -> RowCounts:
    """A report row's ``(passed attempts, scored attempts)``; from its verdict in a report
    that did not record them."""
    passed, scored = stats.get("passed_attempts"), stats.get("scored_attempts")
    if isinstance(passed, int) and isinstance(scored, int):
        return passed, scored
    return (1, 1) if verdict == "passed" else (0, 1) if verdict == "failed" else (0, 0)


def confidence_gate(
    settings: OsmosisSettings, rows: dict[str, Any], counts: list[RowCounts]
) -> GateDecision:
    """The gate's decision on the task's pass rate, at ``--osmosis-gate-confidence`` (else
    ``--osmosis-confidence``, for the interval the point gate shows):

    - one attempt a row: the rows' pass rate (Wilson over rows);
    - repeats: the attempt pass rate, the interval clustered by row (valid at every look
      with ``auto``);
    - repeats with a row rule given (``--osmosis-row-pass``): the rate that rule defines,
      Wilson over the rows' verdicts.
    """
    assert settings.min_pass_rate is not None
    confidence = settings.gate_confidence or settings.confidence
    repeated = settings.n_auto or any(scored > 1 for _, scored in counts)
    if repeated and settings.row_pass_set:
        return rule_gate(
            rows["passed"],
            rows["passed"] + rows["failed"],
            settings.min_pass_rate,
            confidence,
            settings.row_pass.describe(),
            settings.n,
        )
    if repeated:
        return attempts_gate(
            counts,
            settings.min_pass_rate,
            confidence,
            anytime=settings.n_auto and settings.gate_confidence is not None,
        )
    return rows_gate(
        rows["passed"], rows["passed"] + rows["failed"], settings.min_pass_rate, confidence
    )


def _all_errored(rows: dict[str, Any]) -> bool:
    """Every row the run scored errored: nothing was measured, so no gate can pass."""
    return bool(rows["total"]) and rows["passed"] == 0 and rows.get("errored", 0) >= rows["failed"]


def apply_gates(
    settings: OsmosisSettings,
    report: RunReport,
    *,
    baseline: Path | None,
    testsfailed: int,
    exitstatus: int,
) -> GateResult:
    """Evaluate the pass-rate gate and the baseline comparison for a finished run.

    ``testsfailed`` is pytest's count of failed items (row misses and anything else);
    ``baseline`` the resolved ``--osmosis-baseline`` path, if given.
    """
    summary = report.summary()
    rows = summary["rows"]
    extra: dict[str, Any] = {}
    lines: list[str] = []
    verdicts: list[tuple[str, bool]] = []
    override: int | None = None
    failed_rows = rows["failed"]
    incomplete = summary.get("complete") is False
    needs_rows = baseline is not None or settings.min_pass_rate is not None
    current = _current_rows(report) if needs_rows else []
    counts = [row.counts for row in current]
    if settings.min_pass_rate is not None and incomplete:
        # The rows not run could all have failed: an incomplete run never passes the gate.
        not_run = rows.get("not_run", 0)
        extra["gate"] = {
            "min_pass_rate": settings.min_pass_rate,
            "pass_rate": rows["pass_rate"],
            "passed": False,
            "reason": "incomplete run",
        }
        verdicts.append(
            (
                f"gate: incomplete run, {not_run} of {rows['total'] + not_run} rows not run"
                + (f" (stopped by {summary['stopped_by']})" if summary.get("stopped_by") else "")
                + ": failed (the pass-rate gate needs every row)",
                False,
            )
        )
        if exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            override = pytest.ExitCode.TESTS_FAILED
    elif settings.min_pass_rate is not None and _all_errored(rows):
        extra["gate"] = {
            "min_pass_rate": settings.min_pass_rate,
            "pass_rate": 0.0,
            "passed": False,
            "reason": "every row errored",
        }
        verdicts.append(
            (
                f"gate: every row errored ({rows['failed']} of {rows['total']}): failed "
                "(a gate needs rows that ran to their grade)",
                False,
            )
        )
        override = pytest.ExitCode.TESTS_FAILED
    elif settings.min_pass_rate is not None:
        decision = confidence_gate(settings, rows, counts)
        lines.append(f"gate judges {decision.estimand}")
        if settings.gate_confidence is not None:
            ok = decision.outcome == "passed" or (
                decision.outcome == "undecided" and settings.gate_undecided == "pass"
            )
            line = decision.describe()
            forgiven = decision.outcome == "undecided" and ok
            if forgiven:
                line += " (passed: --osmosis-gate-undecided pass)"
        else:
            forgiven = False
            # The point gate: the same rate, read without its interval.
            rate, need = decision.estimate, settings.min_pass_rate
            ok = decision.rows > 0 and rate >= need
            relation = ">=" if ok else "<"
            line = f"gate: {decision.measure} {rate:.1%} {relation} {need:.1%}: " + (
                "passed" if ok else "failed"
            )
        if ok and failed_rows and not forgiven:
            line += f" ({failed_rows} row(s) missed, see above)"
        extra["gate"] = {
            "min_pass_rate": settings.min_pass_rate,
            # The rate the gate judged: the same number as its estimate.
            "pass_rate": decision.estimate,
            "passed": ok,
            **(
                {"confidence": settings.gate_confidence, **decision.as_dict()}
                if settings.gate_confidence is not None
                else {"measure": decision.measure, "estimand": decision.estimand}
            ),
        }
        verdicts.append((line, ok))
        override = _gate_exit(ok, testsfailed - failed_rows, exitstatus)
    if baseline is not None:
        before = load_baseline(baseline, allow_partial=settings.allow_partial_baseline)
        diff = compare(before, _as_document(current))
        test = _regression(
            before,
            current,
            settings.gate_confidence or settings.confidence,
            settings.regression_margin,
        )
        extra["baseline"] = {
            "path": settings.baseline,
            **diff,
            "regressed_answers": _answers(before, diff["regressed"]),
            "test": test.as_dict(),
        }
        partial = before.get("summary", {}).get("complete") is False
        lines.append(
            f"baseline: {len(diff['regressed'])} regressed, {len(diff['improved'])} improved, "
            f"{len(diff['new'])} new, {len(diff['gone'])} gone"
            + (
                f" (the baseline run was incomplete: {_incompleteness(before['summary'])})"
                if partial
                else ""
            )
        )
        for key in diff["regressed"]:
            lines.append(
                f"  REGRESSED {key}  passed -> failed"
                + (
                    f", reward change {diff['reward_deltas'][key]:+g}"
                    if key in diff["reward_deltas"]
                    else ""
                )
            )
        for key in diff["improved"]:
            lines.append(f"  improved  {key}")
        lines.append(test.describe())
        if settings.fail_on_regression and settings.gate_confidence is not None:
            verdicts.append(
                (
                    f"baseline gate: {test.describe()}: "
                    + ("failed (--osmosis-fail-on-regression)" if test.regressed else "passed"),
                    not test.regressed,
                )
            )
            if test.regressed:
                override = pytest.ExitCode.TESTS_FAILED
        elif settings.fail_on_regression:
            regressed = len(diff["regressed"])
            # Without a confidence, any regressed row fails: say so, since the paired test
            # printed above may call the change not significant.
            verdicts.append(
                (
                    f"baseline gate: {regressed} row{'' if regressed == 1 else 's'} regressed: "
                    + (
                        "failed (--osmosis-fail-on-regression fails on any regressed row; with "
                        "--osmosis-gate-confidence only a significant regression fails)"
                        if regressed
                        else "passed"
                    ),
                    not regressed,
                )
            )
            if regressed:
                override = pytest.ExitCode.TESTS_FAILED
    if settings.n_auto:
        attempts, row_total = summary["total_samples"], rows["total"]
        extra["auto"] = {
            "attempts": attempts,
            "rows": row_total,
            "max_n": settings.max_n,
            "fixed_n_attempts": settings.max_n * row_total,
        }
        lines.append(
            f"attempts: auto spent {attempts} attempts over {row_total} rows "
            f"(a fixed --osmosis-n {settings.max_n} would spend {settings.max_n * row_total})"
        )
    return GateResult(extra, lines, override, verdicts)


def _gate_exit(ok: bool, other_failures: int, exitstatus: int) -> int | None:
    """The exit status a gate forces: OK when it passed and only row misses failed the run
    (any other failure keeps it red), failed when it did not pass."""
    if not ok:
        return pytest.ExitCode.TESTS_FAILED
    if exitstatus == pytest.ExitCode.TESTS_FAILED and other_failures <= 0:
        return pytest.ExitCode.OK
    return None


@dataclass(frozen=True)
class _CurrentRow:
    """A row of this run as the gates read it."""

    nodeid: str
    verdict: str
    counts: RowCounts
    rewards: list[Any]


def _current_rows(report: RunReport) -> list[_CurrentRow]:
    return [
        _CurrentRow(
            row.nodeid,
            row.verdict,
            row_counts(row.stats, row.verdict),
            [a.reward for a in row.attempts],
        )
        for row in report.iter_rows()
    ]


def _as_document(current: list[_CurrentRow]) -> dict[str, Any]:
    """This run's rows in the report's shape, for :func:`compare`."""
    return {
        "row_verdicts": [{"nodeid": row.nodeid, "verdict": row.verdict} for row in current],
        "rows": [{"nodeid": row.nodeid, "reward": r} for row in current for r in row.rewards],
    }


def _regression(
    before: dict[str, Any], current: list[_CurrentRow], confidence: float, margin: float
) -> RegressionTest:
    """The paired test over the rows both runs have."""
    earlier = {
        entry["nodeid"]: row_counts(entry, entry.get("verdict", ""))
        for entry in before.get("row_verdicts", [])
    }
    pairs = [(earlier[row.nodeid], row.counts) for row in current if row.nodeid in earlier]
    return regression_test(pairs, confidence, margin=margin)
