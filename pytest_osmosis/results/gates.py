"""Suite gates, each read from the run's report document: the minimum pass rate, the
comparison with a baseline report and ``--osmosis-require-grader``.

Without ``--osmosis-min-pass-rate`` any failed row fails the run, as pytest always does; with
it, the run passes at or above the gate though some rows missed. ``--osmosis-gate-confidence C``
decides the gate on an interval at ``C`` (:mod:`osmosis_rollout.runs.gating`): passed, failed,
or undecided (failing the run unless ``--osmosis-gate-undecided pass``); with it,
``--osmosis-fail-on-regression`` fails only on a significant regression.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.runs.gating import (
    GateDecision,
    RowCounts,
    attempts_gate,
    regression_test,
    rows_gate,
    rule_gate,
)
from osmosis_rollout.runs.report_model import ReportFileError, read_report
from osmosis_rollout.runs.report_text import baseline_counts, ungraded_line
from pytest_osmosis.options import OsmosisSettings


def _row_rewards(attempts: list[dict[str, Any]]) -> dict[str, float]:
    sums: dict[str, list[float]] = {}
    for a in attempts:
        if a.get("reward") is not None:
            sums.setdefault(a["nodeid"], []).append(float(a["reward"]))
    return {k: sum(v) / len(v) for k, v in sums.items()}


def load_baseline(path: Path, *, allow_partial: bool = False) -> dict[str, Any]:
    """Read a previous JSON report; a clear ``UsageError`` when it is missing, not a report, or
    (unless ``allow_partial``) an incomplete run's, whose missing rows would all look new."""
    try:
        document = read_report(path).model_dump(by_alias=True)
    except ReportFileError as exc:
        raise pytest.UsageError(f"--osmosis-baseline: {exc}") from None
    summary = document["summary"]
    if summary.get("complete") is False and not allow_partial:
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
    return dict(regressed=regressed, improved=improved, new=new, gone=gone, reward_deltas=deltas)


@dataclass
class GateResult:
    """What the gates decided: ``extra`` for ``report.json``'s top level (``gate``,
    ``baseline``, ``auto``), ``lines`` printed with the summary, and ``(line, passed)`` per
    gate in ``verdicts``."""

    extra: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    verdicts: list[tuple[str, bool]] = field(default_factory=list)


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
    """The gate's decision at ``--osmosis-gate-confidence`` (else ``--osmosis-confidence``):
    on the rows' pass rate with one attempt a row; with repeats, on the attempt pass rate
    (clustered by row) or, given ``--osmosis-row-pass``, the rate that rule defines."""
    need, confidence = settings.min_pass_rate, settings.gate_confidence or settings.confidence
    assert need is not None
    passed, scored = rows["passed"], rows["passed"] + rows["failed"]
    repeated = settings.n_auto or any(n > 1 for _, n in counts)
    if repeated and settings.row_pass_set:
        rule = settings.row_pass.describe()
        return rule_gate(passed, scored, need, confidence, rule, settings.n)
    if repeated:
        anytime = settings.n_auto and settings.gate_confidence is not None
        return attempts_gate(counts, need, confidence, anytime=anytime)
    return rows_gate(passed, scored, need, confidence)


def apply_gates(
    settings: OsmosisSettings, document: dict[str, Any], *, baseline: Path | None
) -> GateResult:
    """Apply the gates to ``document``, the run's report (its summary and its rows);
    ``baseline`` is the resolved ``--osmosis-baseline`` path, if given."""
    summary, result = document["summary"], GateResult()
    counts = [row_counts(entry, entry["verdict"]) for entry in document["row_verdicts"]]
    if settings.min_pass_rate is not None:
        _pass_rate_gate(settings, summary, counts, result)
    if baseline is not None:
        before = load_baseline(baseline, allow_partial=settings.allow_partial_baseline)
        _baseline_gate(settings, before, document, counts, result)
    if settings.n_auto:
        attempts, rows, max_n = summary["total_samples"], summary["rows"]["total"], settings.max_n
        auto = {
            "attempts": attempts,
            "rows": rows,
            "max_n": max_n,
            "fixed_n_attempts": max_n * rows,
        }
        result.extra["auto"] = auto
        result.lines.append(
            f"attempts: auto spent {attempts} attempts over {rows} rows "
            f"(a fixed --osmosis-n {max_n} would spend {max_n * rows})"
        )
    if settings.require_grader:
        line = ungraded_line(summary, (document.get("config") or {}).get("entrypoint"))
        result.verdicts.append(
            ("require-grader: every row that ran was graded: passed", True)
            if line is None
            else (f"require-grader: {line.removeprefix('ungraded: ')}: failed", False)
        )
    return result


def _pass_rate_gate(
    settings: OsmosisSettings, summary: dict[str, Any], counts: list[RowCounts], result: GateResult
) -> None:
    """``--osmosis-min-pass-rate``: its verdict, its ``gate`` extra and what it judges."""
    need = settings.min_pass_rate
    assert need is not None
    rows, ok, forgiven = summary["rows"], False, False
    how: dict[str, Any]
    if summary.get("complete") is False:
        # The rows not run could all have failed: an incomplete run never passes the gate.
        not_run = rows.get("not_run", 0)
        stopped = f" (stopped by {summary['stopped_by']})" if summary.get("stopped_by") else ""
        line = (
            f"gate: incomplete run, {not_run} of {rows['total'] + not_run} rows not run"
            f"{stopped}: failed (the pass-rate gate needs every row)"
        )
        rate, how = rows["pass_rate"], {"reason": "incomplete run"}
    elif rows["total"] and rows["passed"] == 0 and rows.get("errored", 0) >= rows["failed"]:
        # Every row the run scored errored: nothing was measured, so no gate can pass.
        line = (
            f"gate: every row errored ({rows['failed']} of {rows['total']}): failed "
            "(a gate needs rows that ran to their grade)"
        )
        rate, how = 0.0, {"reason": "every row errored"}
    else:
        decision = confidence_gate(settings, rows, counts)
        result.lines.append(f"gate judges {decision.estimand}")
        # The rate the gate judged: the same number as its estimate.
        rate = decision.estimate
        if settings.gate_confidence is not None:
            forgiven = decision.outcome == "undecided" and settings.gate_undecided == "pass"
            ok = decision.outcome == "passed" or forgiven
            line = decision.describe()
            line += " (passed: --osmosis-gate-undecided pass)" if forgiven else ""
            how = {"confidence": settings.gate_confidence, **decision.as_dict()}
        else:
            # The point gate: the same rate, read without its interval.
            ok = decision.rows > 0 and rate >= need
            line = f"gate: {decision.measure} {rate:.1%} {'>=' if ok else '<'} {need:.1%}: "
            line += "passed" if ok else "failed"
            how = {"measure": decision.measure, "estimand": decision.estimand}
        if ok and rows["failed"] and not forgiven:
            line += f" ({rows['failed']} row(s) missed, see above)"
    result.extra["gate"] = {"min_pass_rate": need, "pass_rate": rate, "passed": ok, **how}
    result.verdicts.append((line, ok))


def _baseline_gate(
    settings: OsmosisSettings,
    before: dict[str, Any],
    document: dict[str, Any],
    counts: list[RowCounts],
    result: GateResult,
) -> None:
    """The comparison with the baseline report ``before``, the paired test over the rows both
    runs have, and with ``--osmosis-fail-on-regression`` its verdict."""
    diff = compare(before, document)
    earlier = {
        entry["nodeid"]: row_counts(entry, entry.get("verdict", ""))
        for entry in before.get("row_verdicts", [])
    }
    pairs = [
        (earlier[entry["nodeid"]], now)
        for entry, now in zip(document["row_verdicts"], counts, strict=True)
        if entry["nodeid"] in earlier
    ]
    confidence = settings.gate_confidence or settings.confidence
    test = regression_test(pairs, confidence, margin=settings.regression_margin)
    result.extra["baseline"] = {
        "path": settings.baseline,
        **diff,
        "regressed_answers": _answers(before, diff["regressed"]),
        "test": test.as_dict(),
    }
    line = "baseline: " + baseline_counts(diff)
    if before.get("summary", {}).get("complete") is False:
        line += f" (the baseline run was incomplete: {_incompleteness(before['summary'])})"
    result.lines.append(line)
    deltas = diff["reward_deltas"]
    for key in diff["regressed"]:
        change = f", reward change {deltas[key]:+g}" if key in deltas else ""
        result.lines.append(f"  REGRESSED {key}  passed -> failed{change}")
    result.lines.extend(f"  improved  {key}" for key in diff["improved"])
    result.lines.append(test.describe())
    if not settings.fail_on_regression:
        return
    if settings.gate_confidence is not None:
        passed = not test.regressed
        why = "failed (--osmosis-fail-on-regression)"
        line = f"baseline gate: {test.describe()}: "
    else:
        # Without a confidence, any regressed row fails: say so, since the paired test
        # printed above may call the change not significant.
        regressed = len(diff["regressed"])
        passed = not regressed
        why = (
            "failed (--osmosis-fail-on-regression fails on any regressed row; with "
            "--osmosis-gate-confidence only a significant regression fails)"
        )
        line = f"baseline gate: {regressed} row{'' if regressed == 1 else 's'} regressed: "
    result.verdicts.append((line + ("passed" if passed else why), passed))
