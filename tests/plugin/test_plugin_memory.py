"""What the plugin keeps per row once pytest has reported it: nothing of its result.

While a run goes on, a reported row leaves neither its attempts nor its record in memory
(issue 16, target 5): its record is in the journal. The end reads the journal once, into one
record per row, which every output reads (issue 33).
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
import time

import pytest


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtestloop(session):
    # The innermost wrapper: every row has been reported, and the plugin has not yet read
    # the journal back to decide the run's verdict.
    result = yield
    from osmosis_rollout.runs.report_model import AttemptRecord, RowRecord

    # The rollouts' thread may still be returning from the last row's callbacks (it holds
    # that attempt's task a moment longer on a busy machine: over 2 s at load 8): count
    # until nothing is held, for ten seconds at most. A record kept for good still shows.
    for _ in range(100):
        gc.collect()
        alive = {"AttemptRecord": 0, "RowRecord": 0}
        for obj in gc.get_objects():
            for kind in (AttemptRecord, RowRecord):
                if type(obj) is kind:
                    alive[kind.__name__] += 1
        if not any(alive.values()):
            break
        time.sleep(0.1)
    # A row item that ran keeps its key and line, not its prompt.
    rows = [item.row for item in session.items if hasattr(item, "row")]
    alive["rows with their prompt"] = sum(1 for row in rows if row.initial_messages or row.raw)
    alive["row keys"] = [row.key for row in rows]
    with open("alive.json", "w") as fh:
        json.dump(alive, fh)
    return result
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
        "AttemptRecord": 0,
        "RowRecord": 0,
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
    # A hook fails row-1 where its verdict is decided: the journal, and the report read
    # back from it, carry the hook's word.
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
        last_lines[entry["row_key"]] = entry["verdict"]
    assert last_lines == verdicts


FINISH_CONFTEST = """
import gc
import json


def pytest_osmosis_run_finished(summary, report_path):
    # The summary and the report files are written: the records the plugin holds.
    from osmosis_rollout.runs.report_model import RowRecord

    gc.collect()
    kept = [obj for obj in gc.get_objects() if type(obj) is RowRecord]
    with open("kept.json", "w") as fh:
        json.dump({"rows": sorted(row.row_key for row in kept), "summary": summary}, fh)
"""


def test_the_end_of_a_run_holds_one_record_per_row_read_from_the_journal(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    (root / "conftest.py").write_text(FINISH_CONFTEST)
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-output=out"
    )
    result.assert_outcomes(passed=4 + PREFLIGHT)
    kept = json.loads((root / "kept.json").read_text())
    # Summary, gates, terminal and report files all read the same records: no copies.
    assert kept["rows"] == [f"row-{i}" for i in range(4)]
    assert kept["summary"]["rows"]["total"] == 4
    report = json.loads((root / "out" / "report.json").read_text())
    assert report["summary"] == kept["summary"]
