"""Where a row's rollouts run: started ahead of pytest's in-order reporting, waited for by
the row's item, and journaled the moment the last attempt ends.

:class:`RowRunner` is a plugin object of its own (registered as ``osmosis-rows``). It keeps
a window of rows submitted ahead of the item pytest is running (:meth:`RowRunner.run_ahead`),
decides each row's verdict on the rollouts' loop as its last attempt finishes and journals
it there (so a crash loses no finished row), hands the verdict to the item that waits for
the row (:meth:`RowRunner.wait_for_row`), and moves the item's record onto its call report.
Each row's state lives on its :class:`~pytest_osmosis.results.rows.Row`.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_osmosis.keys import RECORD_KEY, REPORT_ATTR, WORD_ATTR, row_ref
from pytest_osmosis.results.report import reward_word, row_record
from pytest_osmosis.results.rows import Row, RowBook, RowState
from pytest_osmosis.results.verdict import AttemptResult, RowVerdict, row_verdict
from pytest_osmosis.run.scheduler import RolloutLoopStopped, RolloutScheduler

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.options import OsmosisSettings
    from pytest_osmosis.results.run_folder import RunFolder
    from pytest_osmosis.run.engine import Engine

__all__ = ["ROWS_PLUGIN", "RowRunner", "RowWatcher", "RunHost"]

ROWS_PLUGIN = "osmosis-rows"
ITEM_GRACE_SEC = 60.0
WAIT_TICK_SEC = 0.1
"""How often a waiting item lets the live progress redraw."""


class RowWatcher(Protocol):
    """What the rows tell the live progress display (:mod:`pytest_osmosis.display.live`)."""

    def row_done(self, key: str, verdict: RowVerdict) -> None:
        """A row's rollouts all finished (called on the rollouts' thread)."""

    def waiting(self) -> None:
        """The main thread is waiting for a row: a moment to redraw."""

    def done_waiting(self) -> None:
        """The wait is over: pytest may write again."""


class RunHost(Protocol):
    """What the rows need from the session (:class:`~pytest_osmosis.run.session.OsmosisSession`)."""

    settings: OsmosisSettings
    folder: RunFolder

    def ensure_engine(self) -> Engine:
        """The started engine (started on first use)."""

    def fingerprint(self, row: DatasetRow) -> dict[str, Any]:
        """What ``row``'s result depends on."""

    def item_deadline(self) -> float:
        """How long an item waits for one attempt."""

    def row_attempts(self, key: str) -> int:
        """How many attempts the row under ``key`` gets (``--osmosis-n``, or auto's)."""


class RowRunner:
    """Runs the rows' rollouts for the session, ahead of pytest, one :class:`Row` each."""

    def __init__(self, session: RunHost, book: RowBook) -> None:
        self.session = session
        self.book = book
        self.watcher: RowWatcher | None = None
        """Told when a row's rollouts finish and while an item waits (the live progress)."""
        self._ahead: collections.deque[Callable[[], None]] = collections.deque()

    @property
    def scheduler(self) -> RolloutScheduler:
        """The engine's scheduler (starting the engine on first use)."""
        return self.session.ensure_engine().scheduler

    def run_ahead(self, submits: list[Callable[[], None]]) -> None:
        """Queue row submissions in item order and start the first window of them.

        The window (four times the concurrency, at least 64 rows) keeps every slot busy while
        pytest reports in order, without holding thousands of pending rollouts in memory;
        each finished row tops it up.
        """
        self._ahead.extend(submits)
        self._top_up()

    def _top_up(self) -> None:
        """Submit queued rows once a quarter of the window is free, not one per finished row.

        Three quarters of the window (at least three times the concurrency) are still
        submitted meanwhile, so every slot stays busy. No new row starts once a run file
        could not be written.
        """
        if self.session.folder.write_failure is not None:
            self._ahead.clear()
        if not self._ahead:
            return
        scheduler = self.scheduler
        window = max(64, 4 * scheduler.concurrency)
        free = window - scheduler.pending()
        if free < max(1, window // 4) and free < len(self._ahead):
            return
        while self._ahead and scheduler.pending() < window:
            self._ahead.popleft()()

    def submit_item(self, item: pytest.Item) -> None:
        """Start the rollouts of the row ``item`` runs (if it runs one)."""
        ref = row_ref(item)
        if ref is not None:
            self.submit_row(
                item.nodeid, ref.row, cassette_key=ref.cassette_key, dataset=ref.dataset
            )

    def submit_row(
        self,
        key: str,
        row: DatasetRow,
        *,
        cassette_key: str | None = None,
        dataset: str | None = None,
    ) -> None:
        """Start every attempt of ``row`` under ``key`` (once: never again once submitted).

        With ``dataset``, the row is journaled the moment its last attempt finishes.
        """
        scheduler = self.scheduler
        if self.book.get(key) is not None:
            return
        fingerprint = self.session.fingerprint(row) if dataset is not None else None
        state = self.book.add(key, dataset, fingerprint)
        runner = self.session.ensure_engine().runner
        cassette = cassette_key or row.key

        def attempt_factory(attempt: int) -> Callable[[], Awaitable[AttemptResult]]:
            def start() -> Awaitable[AttemptResult]:
                state.started()
                return runner.run_attempt(row, attempt, cassette_key=cassette)

            return start

        futures = [
            scheduler.submit(f"{key}#{attempt}", attempt_factory(attempt))
            for attempt in range(self.session.row_attempts(key))
        ]
        watcher = self.watcher
        if watcher is not None:
            state.watched = True
        self._when_done(state, futures, row_key=row.key, watcher=watcher)

    def _when_done(
        self,
        state: Row,
        futures: list[concurrent.futures.Future[AttemptResult]],
        *,
        row_key: str,
        watcher: RowWatcher | None,
    ) -> None:
        """As soon as the row's last attempt finishes (on the rollout loop's thread), decide
        its verdict once: journal it (a dataset row), tell ``watcher``, then hand it to the
        item that waits for the row."""
        pending = [len(futures)]
        lock = threading.Lock()
        settled = state.settled
        assert settled is not None

        def done(_: concurrent.futures.Future[AttemptResult]) -> None:
            with lock:
                pending[0] -= 1
                if pending[0]:
                    return
            verdict: RowVerdict | None = None
            try:
                # A failure, cancellation or interruption leaves verdict None: the item
                # reports (and journals) what became of the row.
                if not any(f.cancelled() or f.exception() is not None for f in futures):
                    verdict = self.verdict([f.result() for f in futures])
                    state.finished()
                    if state.dataset is not None:
                        record = row_record(state.key, state.dataset, row_key, verdict)
                        verdict.record = record
                        self.book.journal(state, record)
                    if watcher is not None:
                        watcher.row_done(state.key, verdict)
            finally:
                # Handed over last: from here on the item's thread owns the verdict (a hook
                # may change its outcome, a loop block its record). Whatever happened, the
                # item that waits for the row must not wait for this.
                settled.set_result(verdict)

        for future in futures:
            future.add_done_callback(done)

    def verdict(self, attempts: list[AttemptResult]) -> RowVerdict:
        """The row's verdict over ``attempts`` under the run's threshold and row rule."""
        settings = self.session.settings
        return row_verdict(
            attempts,
            settings.pass_threshold,
            settings.row_pass,
            ungraded_passes=not settings.pass_threshold_set,
        )

    def wait_for_row(
        self,
        key: str,
        row: DatasetRow,
        *,
        cassette_key: str | None = None,
        dataset: str | None = None,
    ) -> RowVerdict:
        """Wait for the attempts submitted under ``key`` (submitting them if needed).

        When every attempt gave a result, the verdict is the one decided where the last of
        them finished, with the record the journal got (:attr:`RowVerdict.record`).
        """
        state = self.book.get(key)
        if state is None:  # not submitted ahead
            self.submit_row(key, row, cassette_key=cassette_key, dataset=dataset)
            state = self.book.get(key)
        assert state is not None
        scheduler = self.scheduler
        deadline = self.session.item_deadline()
        attempts: list[AttemptResult] = []
        submitted: list[float] = []
        decided = True
        for attempt in range(self.session.row_attempts(key)):
            future_key = f"{key}#{attempt}"
            future = scheduler.future(future_key)
            assert future is not None
            submitted.append(scheduler.submitted_at(future_key))
            # Counted from submission, so rows that hang together expire together.
            remaining = max(0.0, submitted[-1] + deadline - time.monotonic())
            try:
                attempts.append(self._result(scheduler, future, remaining))
            except concurrent.futures.TimeoutError:
                decided = False
                future.cancel()
                attempts.append(
                    _synthetic(
                        row,
                        attempt,
                        "item_timeout",
                        f"no result within the item deadline ({deadline:g}s)",
                    )
                )
            except concurrent.futures.CancelledError:
                decided = False
                attempts.append(_synthetic(row, attempt, "cancelled", "the rollout was cancelled"))
            except RolloutLoopStopped as exc:
                decided = False
                attempts.append(_synthetic(row, attempt, "rollout_loop_stopped", str(exc)))
            except Exception as exc:
                decided = False
                attempts.append(
                    _synthetic(row, attempt, "plugin_error", f"{type(exc).__name__}: {exc}")
                )
            finally:
                scheduler.forget(future_key)
        settled, state.settled = state.settled, None  # the item owns the verdict now
        verdict = _settled_verdict(settled) if decided and settled is not None else None
        if _name_blocked_loop(scheduler, attempts, submitted) and verdict is not None:
            verdict.record = None  # built before the attempts were told of the block
        state.state = RowState.REPORTED
        self._top_up()
        return verdict if verdict is not None else self.verdict(attempts)

    def _result(
        self,
        scheduler: RolloutScheduler,
        future: concurrent.futures.Future[AttemptResult],
        timeout: float,
    ) -> Any:
        """``future.result(timeout)``, running the rollouts meanwhile (on this thread: see
        :meth:`RolloutScheduler.wait`) and letting the watcher draw while it waits."""
        watcher = self.watcher
        if watcher is None:
            return scheduler.wait(future, timeout)
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    return scheduler.wait(future, max(0.0, min(left, WAIT_TICK_SEC)))
                except concurrent.futures.TimeoutError:
                    if left <= WAIT_TICK_SEC:
                        raise
                    watcher.waiting()
        finally:
            watcher.done_waiting()

    # -- hooks -----------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Under xdist, start the rollouts of every row queued on this worker, not just this one."""
        if not hasattr(item.config, "workerinput"):
            return
        queued: list[int] = []
        for plugin in item.config.pluginmanager.get_plugins():
            if type(plugin).__name__ == "WorkerInteractor":
                torun = getattr(plugin, "torun", None)
                if torun is not None:
                    with torun.lock() as pending:
                        queued = [i for i in pending if isinstance(i, int)]
        items = item.session.items
        # xdist has already taken ``nextitem`` off the queue: without it, that row would start
        # only when its own item runs, behind every row still queued.
        following = [nextitem] if nextitem is not None else []
        candidates = [item, *following, *(items[i] for i in queued if i < len(items))]
        try:
            for candidate in candidates:
                self.submit_item(candidate)
        except Exception:
            return

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Move a finished row's record from the item onto its call report, journaling the
        reported version where the row ran."""
        report = yield
        # The row's outcome report: its call, or its setup when the row errored there.
        outcome = report.when == "call" or (report.when == "setup" and report.failed)
        if outcome and RECORD_KEY in item.stash:
            record = item.stash[RECORD_KEY]
            del item.stash[RECORD_KEY]
            self.book.journal(self.book.get(item.nodeid), record, reported=True)
            # The record's lists and dicts were built for this row alone, so they travel as
            # they are: dataclasses.asdict's deep copy cost more than the rest of the item's
            # bookkeeping.
            value = {
                "nodeid": record.nodeid,
                "dataset": record.dataset,
                "row_key": record.row_key,
                "verdict": record.verdict,
                "attempts": record.attempts,
                "stats": record.stats,
            }
            setattr(report, REPORT_ATTR, value)
            setattr(report, WORD_ATTR, reward_word(value, self.session.settings.pass_threshold))
            # The row took its rollouts' time, not the moment its item waited for a result
            # that ran ahead: that is what JUnit's time and --durations show.
            rollouts_sec = sum(a.get("duration_ms") or 0.0 for a in record.attempts) / 1000.0
            report.duration = max(report.duration, rollouts_sec)
        return report


def _settled_verdict(
    settled: concurrent.futures.Future[RowVerdict | None],
) -> RowVerdict | None:
    """The verdict decided where the row's last attempt finished (it is being decided now:
    every attempt's result is in), or None to decide it here."""
    try:
        return settled.result(timeout=ITEM_GRACE_SEC)
    except concurrent.futures.TimeoutError:
        return None


def _name_blocked_loop(
    scheduler: RolloutScheduler, attempts: list[AttemptResult], submitted: list[float]
) -> bool:
    """Tell each failed attempt when something blocked the loop while it was in flight;
    True when one was told."""
    now = time.monotonic()
    told = False
    for attempt, started in zip(attempts, submitted, strict=True):
        if attempt.status != "failed":
            continue
        blocks = scheduler.blocks_between(started, now)
        if blocks:
            attempt.blocked_loop = max(blocks, key=lambda b: b.seconds).describe()
            told = True
    return told


def _synthetic(row: DatasetRow, attempt: int, error_type: str, message: str) -> AttemptResult:
    return AttemptResult(
        row_key=row.key,
        row_index=row.index,
        source_row_index=row.source_index,
        run_index=attempt,
        rollout_id="",
        status="failed",
        reward=None,
        error_type=error_type,
        err_message=message,
    )
