"""Each row of the run as one object with explicit states, and the book that holds them.

A :class:`Row` is created when pytest's item for it is submitted and goes::

    submitted -> running -> finished -> reported
                                     \\-> (never reported: -x or a signal stopped pytest)

(``selected`` rows that were never submitted are the run's rows not run; a submitted row
that never finished becomes ``not run`` when the run stops, see :meth:`RowBook.stop`.) A row owns its fingerprint, its
verdict as decided where its last attempt finished (:attr:`Row.settled`), and its place in
the journal: the record written where it finished, until pytest reports it, and whether the
journal holds the version its report carries.

The journal is where a row's verdict lives: :class:`RowBook` is the one writer of the
rows' journal lines (through the run's :class:`~pytest_osmosis.results.report.RunReport`), and
the summary, the exit status, the gates, the report files and a later resume read the
journal back.
"""

from __future__ import annotations

import concurrent.futures
import enum
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from osmosis_rollout.runs.journal import JOURNAL_FILENAME, JournalRow

if TYPE_CHECKING:
    from pytest_osmosis.results.report import RunReport
    from pytest_osmosis.results.run_folder import RunFolder
    from pytest_osmosis.results.verdict import RowVerdict

__all__ = ["Row", "RowBook", "RowState"]


class RowState(enum.Enum):
    """Where a row is in its run."""

    SELECTED = "selected"
    """Chosen to run; no attempt submitted yet."""
    SUBMITTED = "submitted"
    """Its attempts are queued in the scheduler."""
    RUNNING = "running"
    """At least one attempt started."""
    FINISHED = "finished"
    """Every attempt ended; its verdict is settled (and journaled, for a dataset row)."""
    REPORTED = "reported"
    """The item that waits for it took the verdict: pytest reports it."""
    NOT_RUN = "not run"
    """The run ended before the row finished."""


@dataclass(eq=False)
class Row:
    """One row of the run (one pytest item): its state, verdict and place in the journal."""

    key: str
    """The item's node id."""
    dataset: str | None
    """The dataset file, for a row that goes into the run's report (None: marker rows)."""
    fingerprint: dict[str, Any] | None = None
    """What its result depends on (see :mod:`pytest_osmosis.results.resume`)."""
    state: RowState = RowState.SELECTED
    settled: concurrent.futures.Future[RowVerdict | None] | None = field(
        default_factory=concurrent.futures.Future
    )
    """Its verdict, decided where its last attempt finished, until the item that waits for it
    takes it (the result is None when an attempt gave no result: the item decides then)."""
    journaled: JournalRow | None = None
    """The record journaled where it finished, until its report is journaled."""
    journaled_as_reported: bool = False
    """The journal holds the version its report carries: a late write would be stale."""
    watched: bool = False
    """The live progress was told of it."""

    def started(self) -> None:
        """An attempt started (on the rollouts' loop)."""
        if self.state is RowState.SUBMITTED:
            self.state = RowState.RUNNING

    def finished(self) -> None:
        """Every attempt ended with a result (on the rollouts' loop); an item that stopped
        waiting (its deadline) has already reported the row."""
        if self.state in (RowState.SUBMITTED, RowState.RUNNING):
            self.state = RowState.FINISHED


class RowBook:
    """The run's rows by node id, and the one writer of their journal lines."""

    def __init__(self, report: RunReport, folder: RunFolder) -> None:
        self.report = report
        self.folder = folder
        self._rows: dict[str, Row] = {}
        self._lock = threading.Lock()
        """Orders one row's journal writes as they are decided (rollouts' and items' threads)."""

    def get(self, key: str) -> Row | None:
        """The row submitted under ``key``, if any."""
        return self._rows.get(key)

    def add(self, key: str, dataset: str | None, fingerprint: dict[str, Any] | None) -> Row:
        """A new row about to be submitted."""
        row = Row(key, dataset, fingerprint, RowState.SUBMITTED)
        self._rows[key] = row
        return row

    def stop(self) -> None:
        """The run is over: every row that did not finish was not run."""
        for row in self._rows.values():
            if row.state not in (RowState.FINISHED, RowState.REPORTED):
                row.state = RowState.NOT_RUN

    def not_run(self) -> list[str]:
        """The rows submitted that never finished, in submission order (after :meth:`stop`)."""
        return [key for key, row in self._rows.items() if row.state is RowState.NOT_RUN]

    def journal(self, row: Row | None, record: JournalRow, *, reported: bool = False) -> bool:
        """Write ``record`` unless the journal already holds exactly this version of the row.

        ``reported``: the version the row's report carries, which no later write replaces.
        True when the journal holds ``record`` afterwards. A write that fails stops the run
        (:meth:`RunFolder.write_failed`); the row still reaches the report through its test
        report.
        """
        if row is not None:
            record.fingerprint = row.fingerprint
        try:
            # Encoded on the rollouts' thread; the report's version only when it differs (the
            # main thread's work here happens while pytest's output capture is suspended).
            data = None if reported else self.report.encode_row(record)
            with self._lock:
                if reported and row is not None:
                    journaled, row.journaled = row.journaled, None
                    # Usually the very record written where the row finished (handed over).
                    if journaled is record or journaled == record:
                        row.journaled_as_reported = True
                        return True
                elif row is not None and row.journaled_as_reported:
                    return False
                if data is None:
                    data = self.report.encode_row(record)
                if not self.report.journal.write_encoded(data):
                    return False
                if row is not None:
                    if reported:
                        row.journaled_as_reported = True
                    else:
                        row.journaled = record
                return True
        except OSError as exc:
            self.folder.write_failed(exc, JOURNAL_FILENAME)
            return False
