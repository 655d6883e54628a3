"""What the plugin keeps per row once pytest has reported it: nothing of its result.

A 10,000-row run must not hold every row's answer, attempts and record until the session
ends (issue 16, target 5). The report is read back from the journal at the end, so a
reported row leaves neither its attempts nor its record in memory; the report files do
not change (the other plugin tests pin them down).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows

POLICY = "--osmosis-policy=policy.py:policy"
PREFLIGHT = 2

COUNTING_CONFTEST = """
import gc
import json

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # Every row has been reported; the plugin has not built its report yet.
    from osmosis_rollout.runs.journal import JournalRow
    from pytest_osmosis.results.verdict import AttemptResult, RowVerdict

    gc.collect()
    alive = {"AttemptResult": 0, "RowVerdict": 0, "JournalRow": 0}
    for obj in gc.get_objects():
        for kind in (AttemptResult, RowVerdict, JournalRow):
            if type(obj) is kind:
                alive[kind.__name__] += 1
    # A row item that ran keeps its key and line, not its prompt.
    rows = [item.row for item in session.items if hasattr(item, "row")]
    alive["rows with their prompt"] = sum(1 for row in rows if row.initial_messages or row.raw)
    alive["row keys"] = [row.key for row in rows]
    with open("alive.json", "w") as fh:
        json.dump(alive, fh)
"""


def test_reported_rows_leave_no_attempts_verdicts_records_or_prompts_in_memory(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(6))
    (root / "conftest.py").write_text(COUNTING_CONFTEST)
    # Subprocess: objects of other tests in this process must not count. Piped output
    # shows the line progress, which counts every row as its rollout finishes.
    result = pytester.runpytest_subprocess("--osmosis-dataset=data/test.jsonl", POLICY)
    result.assert_outcomes(passed=6 + PREFLIGHT)
    alive = json.loads((root / "alive.json").read_text())
    assert alive == {
        "AttemptResult": 0,
        "RowVerdict": 0,
        "JournalRow": 0,
        "rows with their prompt": 0,
        "row keys": [f"row-{i}" for i in range(6)],
    }
    # The rows come back from the journal into the report: whole, in item order, keys in
    # the order the attempt records have them, formatted as json.dump(indent=2) writes.
    text = next((root / ".osmosis" / "runs").glob("*/report.json")).read_text()
    report = json.loads(text)
    assert text == json.dumps(report, indent=2) + "\n"
    assert [row["row_key"] for row in report["rows"]] == [f"row-{i}" for i in range(6)]
    assert all(row["last_assistant"] for row in report["rows"])
    assert list(report["rows"][0])[:4] == ["row_key", "row_index", "source_row_index", "run_index"]
    assert list(report["rows"][0])[-3:] == ["trajectory_filename", "nodeid", "dataset"]
    assert all(Path(row["trajectory_filename"]).is_file() for row in report["rows"])


def test_a_row_changed_by_its_report_is_reported_as_changed(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    # The rollouts' thread journals row-1 as passed; a hook then fails it. The report,
    # read back from the journal, must carry the reported version.
    root = workspace(multiply_rows(3))
    (root / "conftest.py").write_text(
        "def pytest_osmosis_row_verdict(row, result):\n"
        "    return False if row['row_key'] == 'row-1' else None\n"
    )
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-output=out")
    result.assert_outcomes(passed=2 + PREFLIGHT, failed=1)
    report = json.loads((root / "out" / "report.json").read_text())
    verdicts = {row["row_key"]: row["verdict"] for row in report["row_verdicts"]}
    assert verdicts == {"row-0": "passed", "row-1": "failed", "row-2": "passed"}
    last_lines: dict[str, str] = {}
    for line in (root / "out" / "rows.jsonl").read_text().splitlines():
        entry = json.loads(line)
        last_lines[entry["row_key"]] = entry["row_verdict"]
    assert last_lines == verdicts


FINISH_CONFTEST = """
import gc
import json


def pytest_osmosis_run_finished(summary, report_path):
    # The summary and the report files are written: what the plugin still holds of the rows.
    from osmosis_rollout.runs.journal import JournalRow

    gc.collect()
    kept = [obj for obj in gc.get_objects() if type(obj) is JournalRow]
    with open("kept.json", "w") as fh:
        json.dump({"rows": sorted(row.row_key for row in kept), "summary": summary}, fh)
"""


def test_the_end_of_a_run_reads_its_rows_back_one_at_a_time_and_keeps_none(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    (root / "conftest.py").write_text(FINISH_CONFTEST)
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-output=out"
    )
    result.assert_outcomes(passed=4 + PREFLIGHT)
    kept = json.loads((root / "kept.json").read_text())
    # Summary, gates, terminal and report files each stream the rows from the journal.
    assert kept["rows"] == []
    assert kept["summary"]["rows"]["total"] == 4
    report = json.loads((root / "out" / "report.json").read_text())
    assert report["summary"] == kept["summary"]
    assert [row["row_key"] for row in report["rows"]] == [f"row-{i}" for i in range(4)]
    assert all(row["last_assistant"] and row["rollout_id"] for row in report["rows"])
    out = result.stdout.str()
    assert "rollout time: sum " in out and "slowest: row-" in out


def test_the_html_report_is_rendered_row_by_row_into_the_same_page(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    from pytest_osmosis.results.html import render

    root = workspace(multiply_rows(3))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-output=out",
        "--osmosis-n=2",
        "--osmosis-html=report.html",
    )
    result.assert_outcomes(passed=3 + PREFLIGHT)
    page = (root / "report.html").read_text()
    # Streamed from the journal a row at a time: the page a whole-document render gives.
    assert page == render(json.loads((root / "out" / "report.json").read_text()))
    assert page.count('class="group') >= 3 and page.endswith("</html>\n")
