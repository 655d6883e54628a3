"""A row is one object with explicit states: decided once, journaled once, released once reported."""

from __future__ import annotations

import threading
from pathlib import Path

from osmosis_rollout.runs.journal import RowJournal, read_journal
from osmosis_rollout.runs.report_model import AttemptRecord, RowRecord
from pytest_osmosis.results.rows import Row, RowBook, RowState
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
    journal = RowJournal(tmp_path / "rows.jsonl", fresh=True, run_id="run-1")
    return RowBook(journal, RunFolder(tmp_path, run_id="run-1"))


def record(verdict: str = "passed") -> RowRecord:
    attempt = AttemptRecord(row_key="row-0", status="success", reward=1.0, passed=True)
    return RowRecord(
        nodeid="d::row-0", dataset="d", row_key="row-0", verdict=verdict, attempts=[attempt]
    )


def test_a_row_goes_submitted_running_and_is_released_once_reported(tmp_path: Path) -> None:
    row = book(tmp_path).add(Row("d::row-0", "row-0", "d", 2, fingerprint={"row": "x"}))
    assert row.state is RowState.SUBMITTED
    assert row.results == [None, None]
    row.started()
    assert row.state is RowState.RUNNING
    assert row.claim()
    assert row.settled is not None
    row.settled.set_result(record())
    assert row.record is not None and row.record.verdict == "passed"
    row.release()
    assert (row.state, row.settled, row.record, row.results) == (
        RowState.REPORTED,
        None,
        None,
        [None, None],
    )
    assert not row.claim()  # a late attempt of a reported row decides nothing


def test_exactly_one_of_many_threads_claims_a_row() -> None:
    row = Row("d::row-0", "row-0", "d", 1)
    claims: list[bool] = []
    start = threading.Barrier(8)

    def claim() -> None:
        start.wait()
        claims.append(row.claim())

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(claims) == [False] * 7 + [True]


def test_a_decided_row_is_journaled_once_with_its_fingerprint_and_run(tmp_path: Path) -> None:
    rows = book(tmp_path)
    row = rows.add(Row("d::row-0", "row-0", "d", 1, fingerprint=FINGERPRINT))
    rows.journal_row(row, record())
    journaled, bad = read_journal(tmp_path / "rows.jsonl")
    assert bad == 0
    assert [(r.nodeid, r.verdict, r.fingerprint, r.run_id) for r in journaled] == [
        ("d::row-0", "passed", FINGERPRINT, "run-1")
    ]
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == 1
