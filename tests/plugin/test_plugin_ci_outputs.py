"""What CI reads besides the exit status: the markdown job summary, JUnit's errors and gate
cases, and the printed rerun line, which must never destroy the run it came from."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import MAIN_PY, multiply_rows

POLICY = "--osmosis-policy=policy.py:policy"
DATASET = "--osmosis-dataset=data/test.jsonl"
PREFLIGHT = 2
WAIT_SEC = 300

# The demo workflow, raising on a row that asks it to.
RAISING_MAIN = MAIN_PY.replace(
    "        rollout = get_rollout_context()\n",
    "        rollout = get_rollout_context()\n"
    '        if "boom" in ctx.prompt[-1]["content"]:\n'
    '            raise ValueError("the workflow broke on purpose")\n',
)


def _rows_with_boom(n: int, *, wrong: set[int], boom: set[int]) -> list[dict[str, str]]:
    rows = multiply_rows(n, wrong=wrong)
    for i in boom:
        rows[i]["user_prompt"] += " boom"
    return rows


def test_an_errored_row_is_a_junit_error_and_the_markdown_says_why(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace(_rows_with_boom(5, wrong={1}, boom={3}), main=RAISING_MAIN)
    step_summary = root / "step-summary.md"
    step_summary.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    result = pytester.runpytest(
        DATASET, POLICY, "--junitxml=junit.xml", "--osmosis-markdown=summary.md"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # pytest, JUnit and the markdown agree: one row below the threshold, one that errored.
    assert result.parseoutcomes() == {"failed": 1, "errors": 1, "passed": 3 + PREFLIGHT}
    suite = ET.parse(root / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors")) == ("1", "1")
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    error = cases["row-3"].find("error")
    assert error is not None
    # The exception's category and message (a ValueError is the SDK's validation_error).
    message = error.get("message", "")
    assert message.startswith('failed on setup with "Failed: row-3 (test.jsonl line 4): rollout')
    assert "failed [validation_error]: the workflow broke on purpose" in (error.text or "")
    assert cases["row-1"].find("failure") is not None
    markdown = (root / "summary.md").read_text(encoding="utf-8")
    assert markdown.startswith("## pytest-osmosis: ❌ failed\n")
    assert "| ❌ rows | rows: 3 passed, 2 failed (1 errored, 1 below threshold) |" in markdown
    worst = markdown.split("### Rows that missed (2)")[1]
    # Errored rows first, each with its reason.
    assert worst.index("row-3") < worst.index("row-1")
    assert "errored: row-3 (test.jsonl line 4): rollout failed [validation_error]" in worst
    assert "below threshold: row-1 (test.jsonl line 2): reward 0 < threshold 1" in worst
    # Appended to the job summary, after what earlier steps wrote there.
    assert step_summary.read_text(encoding="utf-8") == "earlier step\n" + markdown + "\n"


def test_a_gate_is_its_own_junit_case_and_its_rows_are_expected_failures(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(_rows_with_boom(6, wrong={1, 2}, boom={4}), main=RAISING_MAIN)
    result = pytester.runpytest(
        DATASET,
        POLICY,
        "--osmosis-min-pass-rate=0.8",
        "--junitxml=junit.xml",
        "--osmosis-markdown=summary.md",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert result.parseoutcomes() == {"failed": 1, "passed": 3 + PREFLIGHT, "xfailed": 3}
    suite = ET.parse(root / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    gate = next(c for c in suite.iter("testcase") if c.get("name") == "min-pass-rate")
    assert gate.get("classname") == "osmosis-gate"
    failure = gate.find("failure")
    assert failure is not None
    assert failure.get("message") == "gate: pass rate 50.0% < 80.0%: failed"
    markdown = (root / "summary.md").read_text(encoding="utf-8")
    assert "| ❌ gate | gate: pass rate 50.0% < 80.0%: failed |" in markdown
    assert "| ⚠️ rows | rows: 3 passed, 3 failed (1 errored, 2 below threshold)" in markdown
    assert "errored, counted by the gate: row-4 (test.jsonl line 5)" in markdown


def _rerun_line(output: str) -> str:
    match = re.search(r"^\s+rerun: (pytest .*)$", output, re.MULTILINE)
    assert match, output
    return match.group(1)


def _bytes(paths: list[Path]) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in paths}


def test_the_printed_rerun_line_leaves_the_run_and_its_baseline_untouched(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(5))
    pytester.runpytest(
        DATASET, POLICY, "-o", "osmosis_output=first", "-o", "osmosis_report=base.json"
    ).assert_outcomes(passed=5 + PREFLIGHT)
    workspace(multiply_rows(5, wrong={2}))
    # The ini names the run folder and the report; the command line the HTML and baseline.
    pytester.makeini("[pytest]\nosmosis_output = out\nosmosis_report = kept/r.json\n")
    result = pytester.runpytest(
        DATASET, POLICY, "--osmosis-baseline=base.json", "--osmosis-html=h.html"
    )
    result.assert_outcomes(passed=4 + PREFLIGHT, failed=1)
    line = _rerun_line(result.stdout.str())
    for destination in ("out", "kept/r.json", "h.html"):
        assert f"={destination}" not in line and f" {destination}" not in line, line
    kept = [
        root / "out" / "report.json",
        root / "out" / "rows.jsonl",
        root / "kept" / "r.json",
        root / "base.json",
        root / "h.html",
    ]
    before = _bytes(kept)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    env.pop("GITHUB_STEP_SUMMARY", None)
    pasted = subprocess.run(
        line, shell=True, cwd=root, env=env, capture_output=True, text=True, timeout=WAIT_SEC
    )
    assert pasted.returncode == pytest.ExitCode.TESTS_FAILED, pasted.stdout[-3000:]
    assert re.search(r"=+ 1 failed in ", pasted.stdout), pasted.stdout[-3000:]
    assert _bytes(kept) == before


def test_the_rerun_line_leaves_out_destinations_named_by_their_clearer_aliases(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    """``--osmosis-json-report`` and ``--osmosis-html-report`` (the names the help lists
    first) name files this run writes, as their stems do: never in the rerun line."""
    workspace(multiply_rows(3, wrong={1}))
    result = pytester.runpytest(
        DATASET, POLICY, "--osmosis-json-report", "r.json", "--osmosis-html-report", "h.html"
    )
    result.assert_outcomes(passed=2 + PREFLIGHT, failed=1)
    line = _rerun_line(result.stdout.str())
    assert "report" not in line and "r.json" not in line and "h.html" not in line, line
    assert POLICY in line and DATASET in line, line


def test_a_flag_alias_takes_no_value_in_the_rerun_line() -> None:
    from pytest_osmosis.collect.items import _osmosis_args

    args = ["--osmosis-start-server", "--osmosis-n", "2", "data/test.jsonl"]
    assert _osmosis_args(args) == ["--osmosis-start-server", "--osmosis-n", "2"]


def test_a_run_refuses_to_replace_an_earlier_runs_report_unless_asked(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(2))
    args = (DATASET, POLICY, "--osmosis-report=r.json")
    pytester.runpytest(*args).assert_outcomes(passed=2 + PREFLIGHT)
    first = (root / "r.json").read_bytes()
    again = pytester.runpytest(*args)
    assert again.ret == pytest.ExitCode.USAGE_ERROR
    again.stderr.fnmatch_lines(
        [
            f"ERROR: --osmosis-report: {root / 'r.json'} exists (an earlier run wrote it); "
            "pass --osmosis-overwrite to replace it, or choose another path"
        ]
    )
    assert (root / "r.json").read_bytes() == first
    folder = pytester.runpytest(DATASET, POLICY, "--osmosis-output=out")
    folder.assert_outcomes(passed=2 + PREFLIGHT)
    refused = pytester.runpytest(DATASET, POLICY, "--osmosis-output=out")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--osmosis-output: *out holds an earlier run*"])
    replaced = pytester.runpytest(*args, "--osmosis-overwrite")
    replaced.assert_outcomes(passed=2 + PREFLIGHT)
    assert json.loads((root / "r.json").read_text())["run_id"] != json.loads(first)["run_id"]
