"""The run verdict's decision, on its own: outcome, exit status and reasons from the run's end."""

from __future__ import annotations

from typing import Any

import pytest

from osmosis_rollout.runs.run_verdict import decide, gate_name


def _summary(passed: int, failed: int, errored: int = 0, **end: Any) -> dict[str, Any]:
    rows = {"total": passed + failed, "passed": passed, "failed": failed, "errored": errored}
    rows["not_run"] = end.pop("not_run", 0)
    return {"rows": rows, "complete": True, **end}


def test_failed_rows_fail_the_run_unless_a_pass_rate_gate_counts_them() -> None:
    plain = decide(_summary(3, 1), gates=(), gated=False)
    assert (plain.outcome, plain.exit_status) == ("failed", 1)
    assert plain.reasons[0].line == "rows: 3 passed, 1 failed (1 below threshold)"
    gated = decide(
        _summary(3, 1), gates=[("gate: pass rate 75.0% >= 70.0%: passed", True)], gated=True
    )
    assert (gated.outcome, gated.exit_status) == ("passed", 0)
    assert [(r.kind, r.outcome) for r in gated.reasons] == [
        ("rows", "tolerated"),
        ("gate", "passed"),
    ]


def test_a_failed_gate_comes_first_and_names_its_test_case() -> None:
    verdict = decide(
        _summary(9, 0), gates=[("gate: pass rate 100.0% ...: undecided at 95%", False)], gated=True
    )
    assert verdict.outcome == "failed" and verdict.exit_status == 1
    assert (verdict.reasons[0].name, verdict.reasons[0].outcome) == ("min-pass-rate", "failed")


@pytest.mark.parametrize(
    ("end", "outcome", "status", "line"),
    [
        (
            {"complete": False, "interrupted": True, "stopped_by": "SIGHUP", "not_run": 2},
            "incomplete",
            2,
            "interrupted by SIGHUP: 2 of 4 rows not run",
        ),
        (
            {"complete": False, "interrupted": False, "stopped_by": "-x", "not_run": 2},
            "incomplete",
            1,
            "stopped by -x: 2 of 4 rows not run",
        ),
    ],
    ids=["signal", "-x"],
)
def test_a_stopped_run_is_incomplete_whatever_its_rows_say(
    end: dict[str, Any], outcome: str, status: int, line: str
) -> None:
    verdict = decide(_summary(2, 0, **end), gates=(), gated=False)
    assert (verdict.outcome, verdict.exit_status, verdict.reasons[0].line) == (
        outcome,
        status,
        line,
    )


def test_a_file_not_written_and_other_failed_tests_fail_the_run() -> None:
    disk = decide(_summary(2, 0), gates=(), gated=False, disk=["osmosis: could not write x"])
    assert (disk.outcome, disk.exit_status) == ("failed", 12)
    tests = decide(_summary(2, 0), gates=(), gated=False, other_failures=1)
    assert tests.reasons[0].line == (
        "tests: 1 other test failed (a preflight check or a test of your own)"
    )


def test_gate_lines_name_their_cases() -> None:
    assert gate_name("gate: pass rate 75.0% < 80.0%: failed") == "min-pass-rate"
    assert gate_name("baseline gate: 2 rows regressed: failed") == "regression"
    assert gate_name("require-grader: 3 rows: failed") == "require-grader"
