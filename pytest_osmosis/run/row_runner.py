"""Where a row's rollouts run, and where its verdict is decided: once, on the rollouts' loop.

:class:`RowRunner` (the ``osmosis-rows`` plugin object) keeps a window of rows submitted
ahead of the item pytest is running. As a row's last attempt ends, the loop's thread decides
its verdict, journals it and tells the live progress; the item that waits for the row only
takes the record, and when it gives up waiting it hands the loop the row to settle with what
it has (see docs/architecture.md).
"""

from __future__ import annotations

import collections
import concurrent.futures
import copy
import functools
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from osmosis_rollout.runs.report_model import AttemptRecord, RowRecord
from pytest_osmosis.keys import REPORT_ATTR, WORD_ATTR, row_ref
from pytest_osmosis.results.report import reward_word
from pytest_osmosis.results.rows import Row, RowBook, RowState
from pytest_osmosis.results.verdict import decide_row, hook_outcome
from pytest_osmosis.run.infra_breaker import InfraBreaker, NotStarted
from pytest_osmosis.run.scheduler import RolloutLoopStopped, RolloutScheduler

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.display.live import LiveProgress
    from pytest_osmosis.options import OsmosisSettings
    from pytest_osmosis.results.run_folder import RunFolder
    from pytest_osmosis.run.engine import Engine

__all__ = ["ROWS_PLUGIN", "RowRunner", "RunHost"]

ROWS_PLUGIN = "osmosis-rows"
ITEM_GRACE_SEC = 60.0
"""How long an item that gave up waiting lets the loop settle its row."""

Missing = tuple[str, str]
"""What became of the attempts with no result: ``(error_type, message)``."""


class RunHost(Protocol):
    """What the rows and the xdist hooks need of the session (``OsmosisSession``)."""

    config: pytest.Config
    settings: OsmosisSettings
    folder: RunFolder
    is_worker: bool
    selected: list[str]
    auto: dict[str, int] | None

    def set_out(self, selected: list[str]) -> None: ...

    def ensure_engine(self) -> Engine: ...

    def fingerprint(self, row: DatasetRow) -> dict[str, Any]: ...

    def item_deadline(self) -> float: ...


class RowRunner:
    """Runs the rows' rollouts for the session, ahead of pytest, one :class:`Row` each."""

    def __init__(self, session: RunHost, book: RowBook) -> None:
        self.session = session
        self.book = book
        self.watcher: LiveProgress | None = None
        """Told when a row's verdict is decided and while an item waits."""
        self.breaker = InfraBreaker()
        """Trips when the model or rollout server is plainly down: no new rollout starts."""
        self._ahead: collections.deque[pytest.Item] = collections.deque()

    def run_ahead(self, items: list[pytest.Item]) -> None:
        """Queue the items' rows in item order and start the first window of them: four times
        the concurrency (at least 64 rows), topped up once a quarter of it is free. No new row
        starts once a run file could not be written, or the breaker tripped."""
        self._ahead.extend(items)
        self._top_up()

    def _top_up(self) -> None:
        if self.session.folder.write_failure is not None or self.breaker.tripped is not None:
            self._ahead.clear()
        if not self._ahead:
            return
        scheduler = self.session.ensure_engine().scheduler
        window = max(64, 4 * scheduler.concurrency)
        free = window - scheduler.pending()
        if free < max(1, window // 4) and free < len(self._ahead):
            return
        while self._ahead and scheduler.pending() < window:
            self.submit_item(self._ahead.popleft())

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
        """Start every attempt of ``row`` under ``key``, once; with ``dataset``, the row is
        journaled the moment its verdict is decided."""
        engine = self.session.ensure_engine()
        if self.book.get(key) is not None:
            return
        fingerprint = self.session.fingerprint(row) if dataset is not None else None
        # --osmosis-n, or what auto gave the row (one for a row auto did not run)
        auto = self.session.auto
        attempts = auto.get(key, 1) if auto is not None else self.session.settings.n
        state = self.book.add(
            Row(key, row.key, dataset, attempts, row.index, row.source_index, fingerprint)
        )
        state.watched = self.watcher is not None

        async def start(attempt: int) -> AttemptRecord:
            if self.breaker.tripped is not None:
                # Its row is not journaled (a resume runs it); its item, if pytest reaches
                # it before stopping, fails saying why.
                raise NotStarted(f"not started: {self.breaker.tripped}")
            state.started()
            return await engine.runner.run_attempt(
                row, attempt, cassette_key=cassette_key or row.key
            )

        for attempt in range(attempts):
            future = engine.scheduler.submit(f"{key}#{attempt}", functools.partial(start, attempt))
            future.add_done_callback(
                functools.partial(self._attempt_ended, engine.scheduler, state, attempt)
            )

    def _attempt_ended(
        self,
        scheduler: RolloutScheduler,
        row: Row,
        attempt: int,
        future: concurrent.futures.Future[AttemptRecord],
    ) -> None:
        """Keep an attempt's result (on the loop's thread, unless the loop is gone); the last
        one to end has the row decided."""
        if future.cancelled():
            # The run is stopping (a row it never reported is a row not run, not a failure),
            # or the row was decided without this attempt.
            return
        if isinstance(exc := future.exception(), NotStarted):
            result = _failed(row, attempt, ("not_started", str(exc)))
        elif isinstance(exc, RolloutLoopStopped):
            result = _failed(row, attempt, ("rollout_loop_stopped", str(exc)))
        elif exc is not None:
            result = _failed(row, attempt, ("plugin_error", f"{type(exc).__name__}: {exc}"))
        else:
            result = future.result()
            self.breaker.record(result)
        row.results[attempt] = result
        if all(r is not None for r in row.results):
            self._settle_on_loop(scheduler, row, None)

    def _settle_on_loop(
        self, scheduler: RolloutScheduler, row: Row, missing: Missing | None
    ) -> None:
        """Have the loop's thread decide ``row`` (this one, if it is that or the loop is gone)."""
        if scheduler.stopped is None and not scheduler.on_loop():
            try:
                scheduler.loop.call_soon_threadsafe(self._settle, scheduler, row, missing)
                return
            except RuntimeError:  # the loop is closed
                pass
        self._settle(scheduler, row, missing)

    def _settle(self, scheduler: RolloutScheduler, row: Row, missing: Missing | None) -> None:
        """Decide the row's verdict once (``missing`` stands for attempts with no result),
        journal it, tell the watcher, then hand the record to the item that waits for it."""
        if not row.claim():
            return
        settled = row.settled
        assert settled is not None  # claimed: not released
        settings = self.session.settings
        try:
            missing = missing or ("cancelled", "no result")
            attempts: list[AttemptRecord] = []
            now = time.monotonic()
            for index, result in enumerate(row.results):
                if result is None:
                    future = scheduler.future(f"{row.key}#{index}")
                    if future is not None:
                        future.cancel()  # the item gave up on it
                    result = _failed(row, index, missing)
                if result.status == "failed":  # say if something blocked the loop meanwhile
                    since = scheduler.submitted_at(f"{row.key}#{index}")
                    if blocks := scheduler.blocks_between(since, now):
                        result.blocked_loop = max(blocks, key=lambda b: b.seconds).describe()
                attempts.append(result)
            record = decide_row(
                (row.key, row.dataset, row.row_key),
                attempts,
                settings.pass_threshold,
                settings.row_pass,
                ungraded_passes=not settings.pass_threshold_set,
            )
            # A row the breaker kept from starting has no result: not journaled, a resume runs it.
            if row.dataset is not None and not any(a.error_type == "not_started" for a in attempts):
                self._ask_hook(row, record)
                self.book.journal_row(row, record)
            row.state = RowState.DECIDED
            if self.watcher is not None and row.watched:
                self.watcher.row_done(row.key, record)
        except Exception as exc:
            settled.set_exception(exc)
            return
        settled.set_result(record)

    def _ask_hook(self, row: Row, record: RowRecord) -> None:
        """A ``pytest_osmosis_row_verdict`` hook's verdict replaces the threshold's."""
        hook = self.session.config.hook.pytest_osmosis_row_verdict
        if not hook.get_hookimpls():
            return
        value = _as_primitives(record)
        decided = hook(
            row={name: value[name] for name in ("nodeid", "dataset", "row_key")},
            # Copies: what a hook does with them must not reach the record.
            result={name: copy.deepcopy(value[name]) for name in ("verdict", "attempts", "stats")},
        )
        outcome = None if decided is None else hook_outcome(decided)
        if outcome is not None and outcome != record.verdict:
            row.builtin, record.verdict = record.verdict, outcome

    def wait_for_row(
        self,
        key: str,
        row: DatasetRow,
        *,
        cassette_key: str | None = None,
        dataset: str | None = None,
    ) -> RowRecord:
        """The record of the row submitted under ``key`` (submitting it if needed), as the
        loop decided it; at the item's deadline, the loop settles it with what it has."""
        self.submit_row(key, row, cassette_key=cassette_key, dataset=dataset)  # if not ahead
        state = self.book.get(key)
        assert state is not None
        settled = state.settled
        if settled is None:
            raise RuntimeError(f"{key}: its row was already reported")
        scheduler = self.session.ensure_engine().scheduler
        deadline = self.session.item_deadline()
        # Counted from submission, so rows that hang together expire together.
        left = scheduler.submitted_at(f"{key}#0") + deadline - time.monotonic()
        watcher = self.watcher
        try:
            scheduler.wait(settled, max(0.0, left), idle=watcher.waiting if watcher else None)
        except concurrent.futures.TimeoutError:
            why = ("item_timeout", f"no result within the item deadline ({deadline:g}s)")
            self._give_up(scheduler, state, why)
        except Exception:
            if not settled.done():
                raise  # not the row's failure: drawing while waiting failed
            # Decided, and failed: the item reports it.
        finally:
            if watcher is not None:
                watcher.done_waiting()
            for attempt in range(state.attempts):
                scheduler.forget(f"{key}#{attempt}")
        state.state = RowState.REPORTED
        self._top_up()
        return settled.result(timeout=0)

    def _give_up(self, scheduler: RolloutScheduler, row: Row, why: Missing) -> None:
        """Hand the loop the row to settle with what it has; decide it here only when the
        loop does not answer within :data:`ITEM_GRACE_SEC` (it is blocked or gone)."""
        settled = row.settled
        assert settled is not None  # not reported yet
        self._settle_on_loop(scheduler, row, why)
        try:
            scheduler.wait(settled, ITEM_GRACE_SEC)
        except concurrent.futures.TimeoutError:
            self._settle(scheduler, row, why)
            concurrent.futures.wait([settled], ITEM_GRACE_SEC)  # the loop may be deciding it
        except Exception:
            pass  # the loop decided, and failed: the item reports that

    # -- hooks -----------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Under xdist, start the rollouts of every row queued on this worker, not just this one."""
        if not self.session.is_worker:
            return
        queued: list[int] = []
        for plugin in item.config.pluginmanager.get_plugins():
            torun = getattr(plugin, "torun", None)
            if type(plugin).__name__ == "WorkerInteractor" and torun is not None:
                with torun.lock() as pending:
                    queued = [i for i in pending if isinstance(i, int)]
        items = item.session.items
        # xdist has already taken ``nextitem`` off the queue: without it, that row would start
        # only when its own item runs, behind every row still queued.
        following = [nextitem] if nextitem is not None else []
        try:
            for candidate in [item, *following, *(items[i] for i in queued if i < len(items))]:
                self.submit_item(candidate)
        except Exception:
            return

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Put a dataset row's record on its outcome report (call, or setup when it errored
        there) as JSON primitives pytest-xdist ships, with what ``-v`` shows beside the outcome."""
        report = yield
        if not (report.when == "call" or (report.when == "setup" and report.failed)):
            return report
        if self.breaker.tripped is not None and not item.session.shouldstop:
            # The model or rollout server is down: stop after this item (see infra_breaker).
            item.session.shouldstop = self.breaker.tripped
        row = self.book.get(item.nodeid)
        record = row.record if row is not None and row.dataset is not None else None
        if row is not None:
            row.release()
        if record is not None:
            value = _as_primitives(record)
            setattr(report, REPORT_ATTR, value)
            setattr(report, WORD_ATTR, reward_word(value, self.session.settings.pass_threshold))
            # The row took its rollouts' time, not the moment its item waited for a result
            # that ran ahead: that is what JUnit's time and --durations show.
            rollouts_sec = sum(a.duration_ms for a in record.attempts) / 1000.0
            report.duration = max(report.duration, rollouts_sec)
        return report


def _as_primitives(record: RowRecord) -> dict[str, Any]:
    """A row's record as its test report carries it (and a verdict hook reads it)."""
    return {
        "nodeid": record.nodeid,
        "dataset": record.dataset,
        "row_key": record.row_key,
        "verdict": record.verdict,
        "attempts": record.report_rows(),
        "stats": record.stats,
    }


def _failed(row: Row, attempt: int, why: Missing) -> AttemptRecord:
    """An attempt that gave no result: failed with ``why``."""
    error_type, message = why
    return AttemptRecord(
        row_key=row.row_key,
        row_index=row.index,
        source_row_index=row.source_index,
        run_index=attempt,
        status="failed",
        error_type=error_type,
        err_message=message,
    )
