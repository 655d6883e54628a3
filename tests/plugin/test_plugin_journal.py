"""The run journal, resumed runs, incomplete runs, output paths and the run directory.

Rows stream to ``rows.jsonl`` as their rollouts finish (not when pytest reports them), a
run stopped early says so everywhere (``summary.complete: false``, what stopped it, the
rows not run), output paths are checked before any row runs, and a usage error leaves no
run directory behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from journal_workspace import executed, journal_lines, row_ids, write_workspace

from osmosis_rollout.runs.report import rebuild_report
from pytest_osmosis.results.stopped import EXIT_WRITE_FAILED

PREFLIGHT = 2
RUN = (
    "-p",
    "no:cacheprovider",
    "--osmosis-dataset=data/test.jsonl",
    "--osmosis-policy=policy.py:policy",
    "--osmosis-output=out",
)


def report(root: Path) -> dict[str, object]:
    document: dict[str, object] = json.loads((root / "out" / "report.json").read_text())
    return document


# -- defect 3: the journal -------------------------------------------------------------------


def test_each_row_is_journaled_when_its_rollout_finishes_not_when_pytest_reports_it(
    pytester: pytest.Pytester,
) -> None:
    # Row 0 is reported first, but its rollout waits until rows 1-3 are in the journal:
    # that only happens if they are written as their rollouts finish.
    root = write_workspace(pytester.path, ["after 3", "answer", "answer", "answer"])
    result = pytester.runpytest(*RUN)
    result.assert_outcomes(passed=4 + PREFLIGHT)
    lines = journal_lines(root / "out")
    assert sorted(str(line["nodeid"]) for line in lines) == row_ids(range(4))
    assert lines[-1]["nodeid"] == row_ids([0])[0]


def test_the_report_rebuilt_from_the_journal_equals_the_report(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer", "wrong", "answer", "after 2; wrong"])
    pytester.runpytest(*RUN).assert_outcomes(passed=2 + PREFLIGHT, failed=2)
    written = report(root)
    rebuilt, bad = rebuild_report(root / "out")
    assert bad == 0
    for key in ("summary", "rows", "row_verdicts", "not_run", "config"):
        assert rebuilt[key] == written[key], key
    assert written["summary"]["complete"] is True  # type: ignore[index]


def test_resume_runs_only_the_rows_missing_from_the_journal(pytester: pytest.Pytester) -> None:
    # Run 1 dies (os._exit) in row 2 once rows 0 and 1 are journaled; row 3 is still
    # waiting for a third journal line then, so it never finishes.
    root = write_workspace(pytester.path, ["answer", "answer", "after 2; once-exit", "after 3"])
    first = pytester.runpytest_subprocess(*RUN)
    assert first.ret == 3
    assert sorted(str(line["nodeid"]) for line in journal_lines(root / "out")) == row_ids(range(2))
    started_first = len(executed(root))

    second = pytester.runpytest_subprocess(
        "-p",
        "no:cacheprovider",
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-resume=out",
    )
    assert second.ret == 0, second.stdout.str()
    assert sorted(executed(root)[started_first:]) == ["row-2", "row-3"]
    second.stdout.fnmatch_lines(["resumed: 2 rows already in */out/rows.jsonl were not run again"])
    document = report(root)
    summary = document["summary"]
    assert summary["complete"] is True  # type: ignore[index]
    assert summary["rows"]["total"] == 4 and summary["rows"]["passed"] == 4  # type: ignore[index]
    assert [r["nodeid"] for r in document["row_verdicts"]] == row_ids(range(4))  # type: ignore[union-attr]


def test_resume_refuses_a_directory_that_is_not_a_run(pytester: pytest.Pytester) -> None:
    write_workspace(pytester.path, ["answer"])
    (pytester.path / "empty").mkdir()
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-resume=empty",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--osmosis-resume*empty*run.json*"])
    assert executed(pytester.path) == []


def test_resume_refuses_xdist_rather_than_rerunning_every_row(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer"])
    pytester.runpytest(*RUN).assert_outcomes(passed=1 + PREFLIGHT)
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        "--osmosis-policy=policy.py:policy",
        "--osmosis-resume=out",
        "-n",
        "2",
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--osmosis-resume does not combine with pytest-xdist*"])
    assert executed(root) == ["row-0"]


# -- defect 4: incomplete runs -----------------------------------------------------------------


def test_an_x_run_reports_itself_incomplete_with_the_rows_not_run(
    pytester: pytest.Pytester,
) -> None:
    root = write_workspace(pytester.path, ["wrong", "hang", "hang", "hang"])
    result = pytester.runpytest(*RUN, "-x", "--osmosis-html=out/report.html")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    document = report(root)
    summary = document["summary"]
    assert summary["complete"] is False  # type: ignore[index]
    assert summary["interrupted"] is False  # type: ignore[index]
    assert summary["stopped_by"] == "-x"  # type: ignore[index]
    assert summary["rows"]["not_run"] == 3  # type: ignore[index]
    assert document["not_run"] == row_ids(range(1, 4))
    result.stdout.fnmatch_lines(["*INCOMPLETE: stopped by -x: 3 of 4 rows not run*"])
    html = (root / "out" / "report.html").read_text()
    assert "Incomplete run (-x): 3 row(s) not run" in html


def test_a_maxfail_run_names_maxfail_as_what_stopped_it(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["wrong", "wrong", "hang", "hang"])
    result = pytester.runpytest(*RUN, "--maxfail=2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    summary = report(root)["summary"]
    assert summary["stopped_by"] == "--maxfail=2"  # type: ignore[index]
    assert summary["complete"] is False  # type: ignore[index]
    assert report(root)["not_run"] == row_ids(range(2, 4))


STOP_AFTER_ROW_1 = """
def test_stop():
    assert False, "a failure the gate does not count"
"""

MOVE_THE_TEST_AFTER_ROW_1 = """
def pytest_collection_modifyitems(items):
    test = next(item for item in items if item.name == "test_stop")
    items.remove(test)
    items.insert(items.index(next(i for i in items if i.name == "row-1")) + 1, test)
"""


def test_the_pass_rate_gate_never_passes_an_incomplete_run(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["answer", "wrong", "hang", "hang"])
    # The gate counts row-1 (an expected failure, which -x does not stop at); a test of the
    # user's own that fails right after it stops the run.
    (root / "test_stop.py").write_text(STOP_AFTER_ROW_1)
    (root / "conftest.py").write_text(MOVE_THE_TEST_AFTER_ROW_1)
    result = pytester.runpytest(
        *RUN, "-x", "--osmosis-min-pass-rate=0.5", "data/test.jsonl", "test_stop.py"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["gate: incomplete run, 2 of 4 rows not run (stopped by -x): failed*"]
    )
    assert report(root)["gate"]["passed"] is False  # type: ignore[index]


def test_a_partial_baseline_is_refused_unless_allowed(pytester: pytest.Pytester) -> None:
    root = write_workspace(pytester.path, ["wrong", "hang", "hang"])
    pytester.runpytest(*RUN, "-x")
    (root / "partial.json").write_text((root / "out" / "report.json").read_text())
    write_workspace(root, ["answer", "answer", "answer"])
    refused = pytester.runpytest(*RUN, "--osmosis-baseline=partial.json", "--osmosis-overwrite")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        ["*--osmosis-baseline*partial.json*incomplete*--osmosis-allow-partial-baseline*"]
    )
    allowed = pytester.runpytest(
        *RUN,
        "--osmosis-baseline=partial.json",
        "--osmosis-allow-partial-baseline",
        "--osmosis-overwrite",  # its out/ holds the partial run
    )
    allowed.assert_outcomes(passed=3 + PREFLIGHT)
    allowed.stdout.fnmatch_lines(["*baseline*incomplete*"])


# -- defect 8: output paths ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "why"),
    [
        ("--osmosis-html=blocker/x.html", "*--osmosis-html*blocker*x.html*blocker*is a file*"),
        ("--osmosis-report=blocker/r.json", "*--osmosis-report*blocker*r.json*is a file*"),
        ("--junitxml=blocker/j.xml", "*--junitxml*blocker*j.xml*is a file*"),
        ("--osmosis-report=adir", "*--osmosis-report*adir*is a directory*"),
        ("--osmosis-output=blocker", "*--osmosis-output*blocker*is a file*"),
    ],
)
def test_an_unwritable_output_path_is_a_usage_error_before_any_row_runs(
    pytester: pytest.Pytester, flag: str, why: str
) -> None:
    root = write_workspace(pytester.path, ["answer", "answer"])
    (root / "blocker").write_text("a file, not a directory")
    (root / "adir").mkdir()
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy", flag
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([why])
    assert executed(root) == []
    assert not (root / ".osmosis").exists()


def test_a_report_that_cannot_be_written_at_the_end_is_one_line_after_the_summary_and_exit_12(
    pytester: pytest.Pytester,
) -> None:
    # Valid at start-up; a row then puts a file where the HTML report's directory goes.
    root = write_workspace(pytester.path, ["write-file late/sub", "answer"])
    result = pytester.runpytest(*RUN, "--osmosis-html=late/sub/x.html")
    result.assert_outcomes(passed=2 + PREFLIGHT)
    assert result.ret == EXIT_WRITE_FAILED  # the rows passed, but a report is missing
    out = result.stdout.str()
    assert "Traceback" not in out
    summary_at = out.index("rows: 2  passed: 2")
    failure_at = out.index("osmosis: could not write the HTML report late/sub/x.html")
    assert failure_at > summary_at
    assert report(root)["summary"]["rows"]["passed"] == 2  # type: ignore[index]


# -- defect 11: no run directory for a run that never ran --------------------------------------


@pytest.mark.parametrize("mistake", ["bad-policy", "syntax-error"])
def test_a_usage_error_leaves_no_run_directory(pytester: pytest.Pytester, mistake: str) -> None:
    root = write_workspace(pytester.path, ["answer"])
    args = ["--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy"]
    if mistake == "bad-policy":
        args[1] = "--osmosis-policy=nowhere.py:policy"
    else:
        (root / "rollouts" / "steps" / "main.py").write_text("def broken(:\n")
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert not (root / ".osmosis").exists(), sorted(p.name for p in (root / ".osmosis").rglob("*"))


UNGRADED_MAIN = """
from osmosis_rollout import AgentWorkflow


class NoGrader(AgentWorkflow):
    async def run(self, ctx):
        return [*ctx.prompt, {"role": "assistant", "content": "ok"}]
"""


def test_an_ungraded_row_is_journaled_once_with_the_verdict_it_is_reported_with(
    pytester: pytest.Pytester,
) -> None:
    # No grader and no --osmosis-pass-threshold: the rows pass. The line written where the
    # row finished must already say so (a run stopped before the report keeps that line).
    root = write_workspace(pytester.path, ["answer", "answer", "answer"])
    (root / "rollouts" / "steps" / "main.py").write_text(UNGRADED_MAIN, encoding="utf-8")
    pytester.runpytest(*RUN).assert_outcomes(passed=3 + PREFLIGHT)
    lines = journal_lines(root / "out")
    assert sorted(str(line["nodeid"]) for line in lines) == row_ids(range(3))
    assert {line["verdict"] for line in lines} == {"passed"}
    assert {a["passed"] for line in lines for a in line["attempts"]} == {True}


def test_a_journal_line_is_one_row_in_its_records_key_order(pytester: pytest.Pytester) -> None:
    # One line per row, keys as the record names them (not sorted): the report's rows carry
    # the same order with no bookkeeping.
    root = write_workspace(pytester.path, ["answer", "wrong"])
    pytester.runpytest(*RUN, "--osmosis-n=2").assert_outcomes(passed=1 + PREFLIGHT, failed=1)
    lines = journal_lines(root / "out")
    assert len(lines) == 2
    assert list(lines[0])[:4] == ["nodeid", "dataset", "row_key", "verdict"]
    attempt_keys = [list(a) for line in lines for a in line["attempts"]]  # type: ignore[attr-defined]
    assert attempt_keys[0][:3] == ["row_key", "row_index", "source_row_index"]
    rows = report(root)["rows"]
    assert isinstance(rows, list)
    assert [list(a) for a in rows] == [[*keys, "nodeid", "dataset"] for keys in attempt_keys]


READS_COUNTER = """
import os
import sys

reads = []


def _audit(event, args):
    if event == "open" and str(args[0]).endswith("rows.jsonl"):
        mode, flags = args[1], args[2]
        reading = ("r" in mode and "+" not in mode) if mode else flags & 3 == os.O_RDONLY
        if reading:
            reads.append(str(args[0]))


sys.addaudithook(_audit)


def pytest_unconfigure(config):
    with open("journal_reads.txt", "w") as handle:
        handle.write(str(len(reads)))
"""


def test_the_end_of_a_run_reads_the_journal_once(pytester: pytest.Pytester) -> None:
    # With the HTML report and a baseline too: every output reads the same records.
    root = write_workspace(pytester.path, ["answer", "answer", "wrong"])
    base = pytester.runpytest(*RUN[:-1], "--osmosis-output=base")
    base.assert_outcomes(passed=2 + PREFLIGHT, failed=1)
    (root / "conftest.py").write_text(READS_COUNTER)
    result = pytester.runpytest_subprocess(
        *RUN, "--osmosis-html=report.html", "--osmosis-baseline=base/report.json"
    )
    result.assert_outcomes(passed=2 + PREFLIGHT, failed=1)
    assert (root / "report.html").exists()
    assert (root / "journal_reads.txt").read_text() == "1"


def test_the_rollouts_log_records_go_to_the_rollouts_log_not_to_an_items_report(
    pytester: pytest.Pytester,
) -> None:
    # Row 0 finishes (and logs it, on the rollouts' thread) while pytest waits in its call
    # phase; rows 1 and 2 finish while pytest runs other items. pytest hangs its capturing
    # handlers on every logger, the non-propagating one rollouts.log uses included.
    root = write_workspace(pytester.path, ["after 2; wrong", "answer", "answer"])
    result = pytester.runpytest(*RUN, "-rA")
    result.assert_outcomes(passed=2 + PREFLIGHT, failed=1)
    assert "osmosis_rollout.execution" not in result.stdout.str()
    log = (root / "out" / "rollouts.log").read_text(encoding="utf-8")
    for row in range(3):
        assert f"rollout row-{row}.0." in log, log


def test_x_counts_agree_between_pytest_the_summary_and_the_report(
    pytester: pytest.Pytester,
) -> None:
    # Rows 1-3 fail and are journaled before row 0, the first reported, fails: -x stops
    # pytest there. The rows that finished ahead were never reported, so nothing counts them.
    root = write_workspace(pytester.path, ["after 3; wrong", "wrong", "wrong", "wrong", "answer"])
    result = pytester.runpytest(*RUN, "-x")
    result.assert_outcomes(passed=PREFLIGHT, failed=1)
    result.stdout.fnmatch_lines(
        [
            "rows: 1  passed: 0  failed: 1*",
            "*INCOMPLETE: stopped by -x: 4 of 5 rows not run*",
        ]
    )
    document = report(root)
    rows = document["summary"]["rows"]  # type: ignore[index]
    assert (rows["total"], rows["failed"], rows["not_run"]) == (1, 1, 4)
    assert [r["nodeid"] for r in document["row_verdicts"]] == row_ids([0])  # type: ignore[union-attr]
    assert document["not_run"] == row_ids(range(1, 5))
