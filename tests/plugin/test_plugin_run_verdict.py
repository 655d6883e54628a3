"""One run verdict, read the same everywhere CI looks: pytest's last line, JUnit, report.json,
the HTML and the exit status.

Each test runs the plugin as a user would and reads the verdict from all of them at once,
for the runs where they used to contradict each other: an undecided confidence gate over
rows that all passed, a pass-rate gate that forgives rows below the threshold, a regression
gate against a baseline.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from workspaces import multiply_rows, write_rows

POLICY = "--osmosis-policy=policy.py:policy"
DATASET = "--osmosis-dataset=data/test.jsonl"
PREFLIGHT = 2
OUTPUTS = ("--osmosis-output=out", "--junitxml=junit.xml", "--osmosis-html=report.html")


@dataclass(frozen=True)
class Seen:
    """The verdict as each place CI reads it shows it."""

    exit_status: int
    last_line: str
    outcomes: dict[str, int]
    junit: ET.Element
    report: dict[str, Any]
    html: str

    def junit_case(self, nodeid_tail: str) -> ET.Element:
        for case in self.junit.iter("testcase"):
            if case.get("name") == nodeid_tail:
                return case
        names = [case.get("name") for case in self.junit.iter("testcase")]
        raise AssertionError(f"no JUnit testcase {nodeid_tail!r} among {names}")

    def junit_count(self, key: str) -> int:
        suite = self.junit if self.junit.tag == "testsuite" else self.junit.find("testsuite")
        assert suite is not None
        return int(suite.get(key, "0"))


def seen(result: pytest.RunResult, root: Path) -> Seen:
    return Seen(
        exit_status=int(result.ret),
        last_line=result.outlines[-1],
        outcomes=result.parseoutcomes(),
        junit=ET.parse(root / "junit.xml").getroot(),
        report=json.loads((root / "out" / "report.json").read_text(encoding="utf-8")),
        html=(root / "report.html").read_text(encoding="utf-8"),
    )


def test_an_undecided_gate_over_rows_that_all_passed_fails_everywhere(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(9))
    result = pytester.runpytest(
        DATASET,
        POLICY,
        "--osmosis-min-pass-rate=0.9",
        "--osmosis-gate-confidence=0.95",
        *OUTPUTS,
    )
    run = seen(result, root)
    assert run.exit_status == pytest.ExitCode.TESTS_FAILED
    assert run.outcomes == {"failed": 1, "passed": 9 + PREFLIGHT}, run.last_line
    result.stdout.fnmatch_lines(["FAILED osmosis-gate::min-pass-rate - gate: pass rate 100.0% [*"])
    assert run.junit_count("failures") == 1 and run.junit_count("errors") == 0
    failure = run.junit_case("min-pass-rate").find("failure")
    assert failure is not None and "undecided" in failure.get("message", "")
    verdict = run.report["verdict"]
    assert verdict["outcome"] == "failed"
    gate = next(r for r in verdict["reasons"] if r["name"] == "min-pass-rate")
    assert gate["outcome"] == "failed" and "undecided" in gate["line"]
    assert 'data-verdict="failed"' in run.html


def test_a_passing_gate_keeps_rows_below_the_threshold_listed_but_green(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(27, wrong={1, 4, 9, 13, 20, 26}))
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-min-pass-rate=0.7", *OUTPUTS)
    run = seen(result, root)
    assert run.exit_status == pytest.ExitCode.OK
    assert run.outcomes == {"passed": 21 + PREFLIGHT + 1, "xfailed": 6}, run.last_line
    assert " failed" not in run.last_line
    # Listed: each row below the threshold with its reason, in the osmosis summary.
    result.stdout.fnmatch_lines(
        [
            "*below the threshold, counted by the gate: 6 rows*",
            "*row-1 (test.jsonl line 2): reward 0 < threshold 1*",
        ]
    )
    assert run.junit_count("failures") == 0 and run.junit_count("errors") == 0
    skipped = run.junit_case("row-1").find("skipped")
    assert skipped is not None and "reward 0 < threshold 1" in skipped.get("message", "")
    assert run.junit_case("min-pass-rate").find("failure") is None
    verdict = run.report["verdict"]
    assert verdict["outcome"] == "passed"
    rows = next(r for r in verdict["reasons"] if r["kind"] == "rows")
    assert rows["outcome"] == "tolerated"
    assert run.report["summary"]["rows"]["failed"] == 6
    assert 'data-verdict="passed"' in run.html


def test_a_failing_gate_is_a_failed_test_case_while_its_rows_stay_expected_failures(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4, wrong={2, 3}))
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-min-pass-rate=0.75", *OUTPUTS)
    run = seen(result, root)
    assert run.exit_status == pytest.ExitCode.TESTS_FAILED
    assert run.outcomes == {"failed": 1, "passed": 2 + PREFLIGHT, "xfailed": 2}, run.last_line
    result.stdout.fnmatch_lines(
        ["FAILED osmosis-gate::min-pass-rate - gate: pass rate 50.0% < 75.0%: failed*"]
    )
    assert run.junit_count("failures") == 1
    assert run.report["verdict"]["outcome"] == "failed"


def test_a_regression_gate_fails_the_run_everywhere_and_says_why(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    pytester.runpytest(DATASET, POLICY, "--osmosis-report=base.json").assert_outcomes(
        passed=4 + PREFLIGHT
    )
    write_rows(root / "data" / "test.jsonl", multiply_rows(4, wrong={1}))
    result = pytester.runpytest(
        DATASET,
        POLICY,
        "--osmosis-baseline=base.json",
        "--osmosis-fail-on-regression",
        *OUTPUTS,
    )
    run = seen(result, root)
    assert run.exit_status == pytest.ExitCode.TESTS_FAILED
    # The row that missed, and the gate.
    assert run.outcomes == {"failed": 2, "passed": 3 + PREFLIGHT}, run.last_line
    result.stdout.fnmatch_lines(
        [
            "*REGRESSED *row-1  passed -> failed, reward change -1*",
            "*baseline gate: 1 row regressed: failed (--osmosis-fail-on-regression fails on any "
            "regressed row; with --osmosis-gate-confidence only a significant regression fails)*",
            "FAILED osmosis-gate::regression - baseline gate: 1 row regressed*",
        ]
    )
    assert run.junit_count("failures") == 2
    assert run.junit_case("regression").find("failure") is not None
    report = run.report
    assert report["config"]["fail_on_regression"] is True
    assert report["verdict"]["outcome"] == "failed"
    regression = next(r for r in report["verdict"]["reasons"] if r["name"] == "regression")
    assert regression["kind"] == "gate" and regression["outcome"] == "failed"
    assert report["baseline"]["regressed"] == ["data/test.jsonl::row-1"]
    assert 'data-verdict="failed"' in run.html and "baseline gate" in run.html


def test_the_report_names_the_run_its_times_and_the_tool_version(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    from importlib.metadata import version

    root = workspace(multiply_rows(2))
    result = pytester.runpytest(DATASET, POLICY, *OUTPUTS)
    report = seen(result, root).report
    assert report["verdict"] == {
        "outcome": "passed",
        "exit_status": 0,
        "reasons": [
            {
                "kind": "rows",
                "name": "rows",
                "outcome": "passed",
                "line": "rows: 2 passed, 0 failed",
            }
        ],
    }
    assert report["run_id"] and report["tool_version"] == version("pytest-osmosis")
    assert report["started_at"] <= report["finished_at"]


def test_under_xdist_the_gate_case_runs_once_on_the_controller_over_every_row(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(8, wrong={0, 5}))
    result = pytester.runpytest_subprocess(
        DATASET, POLICY, "--osmosis-min-pass-rate=0.8", "-n", "2", *OUTPUTS
    )
    run = seen(result, root)
    assert run.exit_status == pytest.ExitCode.TESTS_FAILED
    assert run.outcomes == {"failed": 1, "passed": 6 + PREFLIGHT, "xfailed": 2}, run.last_line
    result.stdout.fnmatch_lines(["FAILED osmosis-gate::min-pass-rate - gate: pass rate 75.0% < *"])
    assert run.junit_count("failures") == 1 and run.junit_count("skipped") == 2
    assert run.report["verdict"]["outcome"] == "failed"
