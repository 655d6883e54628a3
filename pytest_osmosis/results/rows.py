"""Each row of the run as one object with explicit states, and the book that holds them.

A :class:`Row` is created when its pytest item is submitted and goes::

    submitted -> running -> decided -> reported
                                    \\-> (never reported: -x or a signal stopped pytest)

Its verdict is decided once (on the rollouts' loop as its last attempt ends, or by its item,
which gave up waiting) and journaled there: that record is the row's one record from then on.
"""

from __future__ import annotations

import concurrent.futures
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osmosis_rollout.runs.journal import JOURNAL_FILENAME
from pytest_osmosis.results.resume import LOST_WRITE

if TYPE_CHECKING:
    from osmosis_rollout.runs.journal import RowJournal
    from osmosis_rollout.runs.report_model import AttemptRecord, RowRecord
    from pytest_osmosis.results.run_folder import RunFolder

__all__ = ["Row", "RowBook", "RowState"]


class RowState(enum.Enum):
    """Where a row is in its run: queued, an attempt started, its verdict decided (and
    journaled), taken by its item for pytest to report."""

    SUBMITTED = "submitted"
    RUNNING = "running"
    DECIDED = "decided"
    REPORTED = "reported"


@dataclass(eq=False)
class Row:
    """One row of the run (one pytest item, ``key`` its node id): its attempts' results and
    its one record. ``dataset`` is None for a row outside the run's report (marker rows);
    ``index`` is its position among the selected rows, ``source_index`` its offset in its file."""

    key: str
    row_key: str
    dataset: str | None
    attempts: int
    index: int = 0
    source_index: int = 0
    fingerprint: dict[str, Any] | None = None
    """What its result depends on (see :mod:`pytest_osmosis.results.resume`)."""
    state: RowState = RowState.SUBMITTED
    results: list[AttemptRecord | None] = field(default_factory=list)
    """Each attempt's result as it ends (None until then)."""
    settled: concurrent.futures.Future[RowRecord] | None = field(
        default_factory=concurrent.futures.Future
    )
    """Its record, once decided (:meth:`claim`), until pytest reported it (:meth:`release`)."""
    builtin: str | None = None
    """The threshold's verdict, when a ``pytest_osmosis_row_verdict`` hook changed it."""
    watched: bool = False
    """The live progress was told of it."""

    def __post_init__(self) -> None:
        if not self.results:
            self.results = [None] * self.attempts

    def started(self) -> None:
        """An attempt started (on the rollouts' loop)."""
        if self.state is RowState.SUBMITTED:
            self.state = RowState.RUNNING

    def claim(self) -> bool:
        """True for the one caller that decides the row (the loop's thread, or the item's when
        the loop is gone): the record's future leaves its pending state, once."""
        if self.settled is None:
            return False  # reported and released
        try:
            return self.settled.set_running_or_notify_cancel()
        except RuntimeError:  # already claimed
            return False

    @property
    def record(self) -> RowRecord | None:
        """The row's record, once decided."""
        settled = self.settled
        if settled is None or not settled.done() or settled.exception() is not None:
            return None
        return settled.result()

    def release(self) -> None:
        """Pytest reported the row: its record is in the journal, its report carries a copy,
        and nothing of it is kept here (a 10,000-row run holds no row's answers)."""
        self.state = RowState.REPORTED
        self.settled = None
        self.results = [None] * self.attempts


class RowBook:
    """The run's rows by node id, and where a decided row is journaled."""

    def __init__(self, journal: RowJournal, folder: RunFolder) -> None:
        self.journal = journal
        self.folder = folder
        self._rows: dict[str, Row] = {}

    def get(self, key: str) -> Row | None:
        """The row submitted under ``key``, if any."""
        return self._rows.get(key)

    def add(self, row: Row) -> Row:
        """Keep a new row about to be submitted."""
        self._rows[row.key] = row
        return row

    def journal_row(self, row: Row, record: RowRecord) -> None:
        """Journal ``record``, the row's verdict, where it was decided. A write that fails
        stops the run (:meth:`RunFolder.write_failed`); the row still reaches its report.
        A row journaled after any write of the run failed is marked to run again on resume."""
        record.fingerprint = row.fingerprint
        if row.fingerprint is not None and self.folder.write_failure is not None:
            # A row ending after a write failed may have lost its cassette or trajectory:
            # its journal line says so, and a resume runs it again rather than keep it.
            record.fingerprint = {**row.fingerprint, LOST_WRITE: self.folder.write_failure}
        try:
            self.journal.write_row(record)
        except OSError as exc:
            self.folder.write_failed(exc, JOURNAL_FILENAME)
