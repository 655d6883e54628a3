"""The hooks pytest-osmosis offers users (``pytest_osmosis.hookspecs``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows


def test_a_conftest_may_implement_the_osmosis_hooks(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_osmosis_row_finished(row, result, report):
            pass

        def pytest_osmosis_run_finished(summary, report_path):
            pass

        def pytest_osmosis_row_verdict(row, result):
            return None
        """
    )
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_misspelt_osmosis_hook_argument_is_refused(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        def pytest_osmosis_row_finished(row, outcome):
            pass
        """
    )
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*pytest_osmosis_row_finished*outcome*"])


def test_the_verdict_hook_takes_the_first_answer(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        import pytest

        class Strict:
            @pytest.hookimpl(tryfirst=True)
            def pytest_osmosis_row_verdict(self, row, result):
                return "failed" if row["row_key"] == "bad" else None

        class Lenient:
            def pytest_osmosis_row_verdict(self, row, result):
                return "passed"

        def pytest_configure(config):
            config.pluginmanager.register(Lenient(), "lenient")
            config.pluginmanager.register(Strict(), "strict")
        """
    )
    pytester.makepyfile(
        """
        def test_first_result(pytestconfig):
            hook = pytestconfig.hook.pytest_osmosis_row_verdict
            assert hook(row={"row_key": "bad"}, result={}) == "failed"
            assert hook(row={"row_key": "good"}, result={}) == "passed"
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


SINK_CONFTEST = """
import json
import os

CONFIG = {}


def pytest_configure(config):
    CONFIG["controller"] = not hasattr(config, "workerinput")


def pytest_osmosis_row_finished(row, result, report):
    with open("results.jsonl", "a", encoding="utf-8") as sink:
        rewards = [a["reward"] for a in result["attempts"]]
        line = {**row, "verdict": result["verdict"], "rewards": rewards,
                "controller": CONFIG["controller"], "when": report.when}
        sink.write(json.dumps(line) + "\\n")


def pytest_osmosis_run_finished(summary, report_path):
    with open("run.json", "w", encoding="utf-8") as sink:
        json.dump({"rows": summary["rows"], "report_path": report_path,
                   "controller": CONFIG["controller"]}, sink)
"""

ARGS = ("--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy")


@pytest.mark.parametrize("xdist", [False, True], ids=["one-process", "xdist"])
def test_a_jsonl_sink_gets_every_row_once_and_the_run_at_the_end_on_the_controller(
    workspace: Callable[..., Path], pytester: pytest.Pytester, xdist: bool
) -> None:
    root = workspace(multiply_rows(5, wrong={2}))
    pytester.makeconftest(SINK_CONFTEST)
    extra = ("-n", "2") if xdist else ()
    result = pytester.runpytest_subprocess(*ARGS, "--osmosis-output=out", *extra)
    result.assert_outcomes(passed=4 + 2, failed=1)
    lines = [json.loads(line) for line in (root / "results.jsonl").read_text().splitlines()]
    assert sorted(line["row_key"] for line in lines) == [f"row-{i}" for i in range(5)]
    assert all(line["controller"] and line["when"] == "call" for line in lines)
    by_key = {line["row_key"]: line for line in lines}
    assert by_key["row-2"]["verdict"] == "failed" and by_key["row-2"]["rewards"] == [0.0]
    assert by_key["row-0"]["nodeid"] == "data/test.jsonl::row-0"
    run = json.loads((root / "run.json").read_text())
    assert run["rows"]["total"] == 5 and run["rows"]["failed"] == 1 and run["controller"]
    assert run["report_path"] == str(root / "out" / "report.json")


def test_a_verdict_hook_replaces_the_threshold_rule_and_says_so(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4, wrong={1}))
    pytester.makeconftest(
        """
        def pytest_osmosis_row_verdict(row, result):
            if row["row_key"] == "row-1":
                return True   # a wrong answer accepted by the user's rule
            if row["row_key"] == "row-3":
                return "failed"
            if row["row_key"] == "row-0":
                return "skipped"
            return None
        """
    )
    result = pytester.runpytest(*ARGS, "--osmosis-output=out")
    result.assert_outcomes(passed=1 + 1 + 2, failed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*row-3 (test.jsonl line 4): failed by a pytest_osmosis_row_verdict hook "
            "(the threshold alone said passed; rewards: 1)*"
        ]
    )
    report = json.loads((root / "out" / "report.json").read_text())
    verdicts = {v["row_key"]: v["verdict"] for v in report["row_verdicts"]}
    assert verdicts == {"row-0": "skipped", "row-1": "passed", "row-2": "passed", "row-3": "failed"}
    # The journal's one line of each row (what a rebuilt report reads) carries the hook's word.
    journal = (root / "out" / "rows.jsonl").read_text().splitlines()
    assert {line["row_key"]: line["verdict"] for line in map(json.loads, journal)} == verdicts
    assert len(journal) == len(verdicts)


def test_a_verdict_hook_runs_once_per_row_where_the_verdict_is_decided(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    """The rollouts' thread decides a row's verdict, the hook's word included, and journals
    it once: no other thread decides it again, and the journal has one line per row."""
    root = workspace(multiply_rows(12))
    (root / "conftest.py").write_text(
        "import threading\n"
        "calls = []\n"
        "def pytest_osmosis_row_verdict(row, result):\n"
        "    calls.append(f\"{row['row_key']} {threading.current_thread().name}\")\n"
        "    return False if row['row_key'] == 'row-3' else None\n"
        "def pytest_unconfigure(config):\n"
        "    open('calls.txt', 'w').write('\\n'.join(calls))\n"
    )
    result = pytester.runpytest(*ARGS, "--osmosis-output=out")
    result.assert_outcomes(passed=11 + 2, failed=1)
    calls = (root / "calls.txt").read_text().splitlines()
    assert sorted(calls) == sorted(f"row-{i} osmosis-rollouts" for i in range(12))
    journal = [json.loads(line) for line in (root / "out" / "rows.jsonl").read_text().splitlines()]
    assert sorted(line["row_key"] for line in journal) == sorted(f"row-{i}" for i in range(12))
    assert {line["row_key"]: line["verdict"] for line in journal}["row-3"] == "failed"


def test_a_verdict_hook_returning_nonsense_is_named(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(1))
    pytester.makeconftest("def pytest_osmosis_row_verdict(row, result):\n    return 'maybe'\n")
    result = pytester.runpytest(*ARGS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*pytest_osmosis_row_verdict returned 'maybe'*"])


def test_a_run_finished_hook_may_move_the_run_directory_before_the_summary_is_printed(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(3, wrong={1}))
    pytester.makeconftest(
        """
        import os
        import shutil


        def pytest_osmosis_run_finished(summary, report_path):
            # A CI step archiving the run for upload.
            run = os.path.dirname(report_path)
            shutil.move(run, run + "-archived")
        """
    )
    result = pytester.runpytest(*ARGS, "--osmosis-output=out")
    result.assert_outcomes(passed=2 + 2, failed=1)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out
    assert "rollout time: sum " in out and "slowest: row-" in out
    assert (root / "out-archived" / "report.json").is_file()
