"""A row is one object with explicit states, and the book journals each version once."""

from __future__ import annotations

from pathlib import Path

from osmosis_rollout.runs.journal import read_journal
from pytest_osmosis.results.report import RowRecord, RunReport
from pytest_osmosis.results.rows import RowBook, RowState
from pytest_osmosis.results.run_folder import RunFolder

FINGERPRINT = {
    "row": "x",
    "entrypoint": "main.py#ab",
    "policy": "policy.py:policy#cd",
    "pass_threshold": 1.0,
    "row_pass": "all",
    "n": 1,
}


def book(tmp_path: Path) -> RowBook:
    report = RunReport(tmp_path, pass_threshold=1.0, settings={}, run_id="run-1")
    return RowBook(report, RunFolder(tmp_path, run_id="run-1"))


def record(verdict: str = "passed") -> RowRecord:
    attempt = {"nodeid": "d::row-0", "run_index": 0, "status": "success", "reward": 1.0}
    return RowRecord("d::row-0", "d", "row-0", verdict, [attempt], {"attempts": 1})


def test_a_row_goes_submitted_running_finished_and_unfinished_rows_end_not_run(
    tmp_path: Path,
) -> None:
    rows = book(tmp_path)
    done = rows.add("d::row-0", "d", {"row": "x"})
    left = rows.add("d::row-1", "d", {"row": "y"})
    assert done.state is RowState.SUBMITTED
    done.started()
    assert done.state is RowState.RUNNING
    done.finished()
    left.started()
    rows.stop()
    assert (done.state, left.state) == (RowState.FINISHED, RowState.NOT_RUN)
    assert rows.not_run() == ["d::row-1"]
    late = rows.add("d::row-2", "d", None)
    late.state = RowState.REPORTED  # its item stopped waiting: the late finish changes nothing
    late.finished()
    assert late.state is RowState.REPORTED


def test_the_reported_version_is_written_once_and_a_late_write_is_dropped(
    tmp_path: Path,
) -> None:
    rows = book(tmp_path)
    row = rows.add("d::row-0", "d", FINGERPRINT)
    first = record()
    assert rows.journal(row, first)
    assert rows.journal(row, first, reported=True)  # the same version: not written again
    assert row.journaled_as_reported
    assert not rows.journal(row, record("failed"))  # a late write from the rollouts' thread
    journaled, bad = read_journal(tmp_path / "rows.jsonl")
    assert bad == 0 and len(journaled) == 1
    assert journaled[0].fingerprint == FINGERPRINT and journaled[0].run_id == "run-1"
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == 1
