"""The session: one named plugin object that owns the run's state and the hooks that use it.

An :class:`OsmosisSession` is registered with pytest's plugin manager as
``"osmosis-session"`` (as pytest's own ``LFPlugin`` and pytest-xdist's ``DSession`` are):
when datasets are configured, at ``pytest_configure`` (see :mod:`pytest_osmosis.startup`);
for tests parametrized by ``@pytest.mark.osmosis_dataset``, once collection found one.
Its hook methods start the rows' rollouts ahead of pytest's in-order reporting, move each
finished row's record onto its report, collect the records (on the controlling process
only), and write the files and the summary at the end.

Collection only reads datasets (cheap: ``--co`` never imports the rollout or starts a
server). The rollout engine (policy endpoint, backend or servers, scheduler) is started the
first time a row is submitted, when the run loop begins.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import datetime as dt
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from osmosis_rollout.redaction import Redactor, redact_handler
from osmosis_rollout.run_journal import (
    JOURNAL_FILENAME,
    RunJournalError,
    read_journal,
    read_run_file,
    write_run_file,
)
from pytest_osmosis.completion import SignalWatch, how_it_ended, incomplete_lines
from pytest_osmosis.keys import (
    RECORD_KEY,
    REPORT_ATTR,
    ROW_KEY,
    SESSION_PLUGIN,
    WORD_ATTR,
    RowRef,
)
from pytest_osmosis.options import OsmosisSettings, resolve_path, resolve_settings
from pytest_osmosis.outputs import OutputWrite, write_outputs
from pytest_osmosis.reporting import (
    RowRecord,
    RunReport,
    reward_word,
    row_record,
    summary_segments,
)
from pytest_osmosis.runners import RunPaths
from pytest_osmosis.scheduler import RolloutLoopStopped, RolloutScheduler
from pytest_osmosis.verdict import AttemptResult, RowVerdict, row_verdict

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.auto_repeats import AutoRepeats
    from pytest_osmosis.engine import Engine

ITEM_GRACE_SEC = 60.0
WAIT_TICK_SEC = 0.1
"""How often a waiting item lets the live progress redraw."""
UNBOUNDED_ITEM_DEADLINE_SEC = 3600.0

logger = logging.getLogger(__name__)

_PYTEST_LOG_HANDLERS = ("log_file_handler", "log_cli_handler", "caplog_handler", "report_handler")
"""pytest's logging plugin handlers: the log file, live logs, caplog and report sections."""


def is_worker(config: pytest.Config) -> bool:
    """True inside a pytest-xdist worker process."""
    return hasattr(config, "workerinput")


def get_session(config: pytest.Config) -> OsmosisSession | None:
    """The registered session, if any."""
    plugin = config.pluginmanager.get_plugin(SESSION_PLUGIN)
    return plugin if isinstance(plugin, OsmosisSession) else None


def ensure_session(config: pytest.Config) -> OsmosisSession:
    """The session, registered on first use when no dataset was given (marker-driven rows)."""
    session = get_session(config)
    if session is None:
        session = OsmosisSession(
            config, resolve_settings(config), workspace=None, entrypoint=None, eval_config=None
        )
        session.register()
    return session


def marker_row(item: pytest.Item) -> DatasetRow | None:
    """The row of a test parametrized by ``@pytest.mark.osmosis_dataset`` that asks for its result."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "osmosis_result" not in getattr(item, "fixturenames", ()):
        return None
    row: DatasetRow | None = callspec.params.get("osmosis_row")
    return row


def _row_ref(item: pytest.Item) -> RowRef | None:
    ref = item.stash.get(ROW_KEY, None)
    if ref is not None:
        return ref
    row = marker_row(item)
    return RowRef(row) if row is not None else None


class RowWatcher(Protocol):
    """What the session tells the live progress display (:mod:`pytest_osmosis.live`)."""

    def row_done(self, key: str, verdict: RowVerdict) -> None:
        """A row's rollouts all finished (called on the rollouts' thread)."""

    def waiting(self) -> None:
        """The main thread is waiting for a row: a moment to redraw."""

    def done_waiting(self) -> None:
        """The wait is over: pytest may write again."""


class OsmosisSession:
    """Everything pytest-osmosis knows during one pytest session, and the hooks that use it."""

    def __init__(
        self,
        config: pytest.Config,
        settings: OsmosisSettings,
        *,
        workspace: Path | None,
        entrypoint: str | None,
        eval_config: Path | None,
    ) -> None:
        self.config = config
        self.settings = settings
        self.workspace = workspace
        self.entrypoint = entrypoint
        self.eval_config = eval_config
        # Under xdist, workers write into the controller's run directory.
        shared = getattr(config, "workerinput", {}).get("osmosis_run_name")
        self.run_name = shared or dt.datetime.now().strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
        self.output = self._output_dir()
        self.redactor = Redactor.from_environment()
        """One redaction step for every output (the policy key joins it when the engine starts)."""
        self.report = RunReport(
            self.output,
            pass_threshold=settings.pass_threshold,
            settings=self.describe(),
            redactor=self.redactor,
            # Workers append to the controller's journal; a resumed run continues its own.
            resume=bool(settings.resume) or is_worker(config),
        )
        self.signals = SignalWatch()
        self.selected: list[str] = []
        """Node ids of the rows this run set out to run, in item order (controller)."""
        self.resumed: list[str] = []
        """Rows a resumed run found already journaled and did not run again."""
        self.resumed_done = 0
        self._journaled: dict[str, RowRecord] = {}
        """Rows the rollouts' thread journaled and pytest has not reported yet: what was written
        (at most the run-ahead window of them)."""
        self._journaled_as_reported: set[str] = set()
        """Rows whose journal line is the version their report carries: a late write from the
        rollouts' thread would be stale."""
        self._journal_lock = threading.Lock()
        self.engine: Engine | None = None
        self.engine_error: BaseException | None = None
        self.result: dict[str, Any] | None = None
        """What ``pytest_sessionfinish`` computed for the terminal summary."""
        self._ahead: collections.deque[Callable[[], None]] = collections.deque()
        self._settled: dict[str, concurrent.futures.Future[RowVerdict | None]] = {}
        """Each submitted row's verdict, decided where its last attempt finished, until the
        item that waits for the row takes it (None when an attempt gave no result)."""
        self._consumed: set[str] = set()
        self._in_journal: set[str] = set()
        """Rows whose reported version this process journaled, until their report is collected."""
        self._summary_started = False
        self._watched: set[str] = set()
        self.watcher: RowWatcher | None = None
        """Told when a row's rollouts finish and while an item waits (the live progress)."""
        self.auto: AutoRepeats | None = None
        """``--osmosis-n auto``: how many attempts each row got (issue 29)."""

    def register(self) -> None:
        """Register this session as the ``osmosis-session`` plugin."""
        self.config.pluginmanager.register(self, SESSION_PLUGIN)

    def _output_dir(self) -> Path:
        if self.settings.resume:
            return resolve_path(self.config, self.settings.resume)
        if self.settings.output:
            return resolve_path(self.config, self.settings.output)
        base = self.workspace or Path(self.config.rootpath)
        return base / ".osmosis" / "runs" / self.run_name

    @property
    def paths(self) -> RunPaths:
        """Where this run writes trajectories and artifacts."""
        return RunPaths(self.output)

    def describe(self) -> dict[str, Any]:
        """The run's configuration, as the report header and JSON report show it."""
        s = self.settings
        return {
            "datasets": list(s.datasets),
            "entrypoint": self.entrypoint,
            "eval_config": str(self.eval_config) if self.eval_config else None,
            "mode": "server" if (s.servers or s.serve) else "in-process",
            "servers": list(s.servers),
            "policy": s.policy or (f"litellm:{s.model}" if s.model else None),
            "record_mode": s.record_mode,
            "pass_threshold": s.pass_threshold,
            "n": f"auto (max {s.max_n})" if s.n_auto else s.n,
            "row_pass": s.row_pass.describe(),
            "concurrency": s.concurrency,
            "agent_timeout": s.agent_timeout,
            "grader_timeout": s.grader_timeout,
            "min_pass_rate": s.min_pass_rate,
            "confidence": s.confidence,  # of the summary's intervals, for a rebuilt report
            "output": str(self.output),
        }

    # -- running rows ----------------------------------------------------------------------

    def item_deadline(self) -> float:
        """How long an item waits for one attempt (the official eval's item deadline)."""
        s = self.settings
        if s.agent_timeout is not None and s.grader_timeout is not None:
            return s.agent_timeout + s.grader_timeout + ITEM_GRACE_SEC
        return UNBOUNDED_ITEM_DEADLINE_SEC

    def ensure_engine(self) -> Engine:
        """Start the engine on first use; a failure is remembered and reported by every row."""
        if self.engine is not None:
            return self.engine
        if self.engine_error is not None:
            raise self.engine_error
        from osmosis_rollout.errors import UsageError
        from pytest_osmosis.engine import start_engine

        try:
            self.engine = start_engine(
                self.config,
                self.settings,
                output=self.output,
                entrypoint=self.entrypoint,
                redactor=self.redactor,
            )
        except UsageError as exc:
            # A missing extra, a bad entrypoint: the user's to fix, said once.
            self.engine_error = pytest.UsageError(f"pytest-osmosis: {exc}")
            raise self.engine_error from exc
        except BaseException as exc:
            self.engine_error = exc
            raise
        self.entrypoint = self.engine.entrypoint
        # Code blocking the loop as long as an item may wait is interrupted (it fails its row)
        # rather than holding pytest's thread, which runs the loop while it waits.
        self.engine.scheduler.block_limit = self.item_deadline()
        return self.engine

    def run_ahead(self, submits: list[Callable[[], None]]) -> None:
        """Queue row submissions in item order and start the first window of them.

        The window (four times the concurrency, at least 64 rows) keeps every slot busy while
        pytest reports in order, without holding thousands of pending rollouts in memory;
        each finished row tops it up.
        """
        self._ahead.extend(submits)
        self._top_up()

    def _window(self) -> int:
        engine = self.ensure_engine()
        return max(64, 4 * engine.scheduler.concurrency)

    def _top_up(self) -> None:
        """Submit queued rows once a quarter of the window is free, all in one hand-off.

        Three quarters of the window (at least three times the concurrency) are still
        submitted meanwhile, so every slot stays busy; each hand-off wakes the loop's thread.
        """
        if not self._ahead:
            return
        window = self._window()
        assert self.engine is not None
        scheduler = self.engine.scheduler
        free = window - scheduler.pending()
        if free < max(1, window // 4) and free < len(self._ahead):
            return
        with scheduler.batch():
            while self._ahead and scheduler.pending() < window:
                self._ahead.popleft()()

    def submit_row(
        self,
        key: str,
        row: DatasetRow,
        *,
        cassette_key: str | None = None,
        dataset: str | None = None,
    ) -> None:
        """Start every attempt of ``row`` under ``key`` (idempotent; never after it was consumed).

        With ``dataset``, the row is journaled the moment its last attempt finishes.
        """
        engine = self.ensure_engine()
        if key in self._consumed or engine.scheduler.future(f"{key}#0") is not None:
            return
        runner = engine.runner
        futures = [
            engine.scheduler.submit(
                f"{key}#{attempt}",
                functools.partial(
                    runner.run_attempt, row, attempt, cassette_key=cassette_key or row.key
                ),
            )
            for attempt in range(self.row_attempts(key))
        ]
        watcher = self.watcher
        if watcher is not None:
            if key in self._watched:
                watcher = None  # submitted again by the item that waits for it: already watched
            else:
                self._watched.add(key)
        journal = (dataset, row.key) if dataset is not None else None
        self._when_done(key, futures, journal=journal, watcher=watcher)

    def _when_done(
        self,
        key: str,
        futures: list[concurrent.futures.Future[AttemptResult]],
        *,
        journal: tuple[str, str] | None,
        watcher: RowWatcher | None,
    ) -> None:
        """As soon as the row's last attempt finishes (on the rollout loop's thread), decide
        its verdict once: journal it (``journal``: its dataset and row key), tell ``watcher``,
        then hand it to the item that waits for the row."""
        pending = [len(futures)]
        lock = threading.Lock()
        settled: concurrent.futures.Future[RowVerdict | None] = concurrent.futures.Future()
        self._settled[key] = settled

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
                    verdict = self._verdict([f.result() for f in futures])
                    if journal is not None:
                        record = row_record(key, journal[0], journal[1], verdict)
                        verdict.record = record
                        self._journal(record)
                    if watcher is not None:
                        watcher.row_done(key, verdict)
            finally:
                # Handed over last: from here on the item's thread owns the verdict (a hook
                # may change its outcome, a loop block its record). Whatever happened, the
                # item that waits for the row must not wait for this.
                settled.set_result(verdict)

        for future in futures:
            future.add_done_callback(done)

    def _journal(self, record: RowRecord, *, reported: bool = False) -> bool:
        """Write ``record`` unless the journal already holds exactly this version of the row.

        ``reported``: the version the row's report carries, which no later write replaces.
        True when the journal holds ``record`` afterwards.
        """
        nodeid = record.nodeid
        try:
            # Encoded on the rollouts' thread; the report's version only when it differs (the
            # main thread's work here happens while pytest's output capture is suspended).
            data = None if reported else self.report.encode_row(record)
            # Under the lock, so the writes of one row reach the file in the order decided here.
            with self._journal_lock:
                if reported:
                    journaled = self._journaled.pop(nodeid, None)
                    # Usually the very record written where the row finished (handed over).
                    if journaled is record or journaled == record:
                        self._journaled_as_reported.add(nodeid)
                        return True
                elif nodeid in self._journaled_as_reported:
                    return False
                if data is None:
                    data = self.report.encode_row(record)
                if not self.report.journal.write_encoded(data):
                    return False
                if reported:
                    self._journaled_as_reported.add(nodeid)
                else:
                    self._journaled[nodeid] = record
                return True
        except OSError as exc:
            # The row still reaches the report through its test report; say why the
            # journal misses it.
            logger.warning("could not journal row %s: %s", record.nodeid, exc)
            return False

    def _submit_item(self, item: pytest.Item) -> None:
        ref = _row_ref(item)
        if ref is not None:
            self.submit_row(
                item.nodeid, ref.row, cassette_key=ref.cassette_key, dataset=ref.dataset
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
        settled = self._settled.pop(key, None)
        if settled is None:  # not submitted ahead
            self.submit_row(key, row, cassette_key=cassette_key, dataset=dataset)
            settled = self._settled.pop(key, None)
        assert self.engine is not None
        scheduler = self.engine.scheduler
        deadline = self.item_deadline()
        attempts: list[AttemptResult] = []
        submitted: list[float] = []
        for attempt in range(self.row_attempts(key)):
            future_key = f"{key}#{attempt}"
            future = scheduler.future(future_key)
            assert future is not None
            submitted.append(scheduler.submitted_at(future_key))
            # Counted from submission, so rows that hang together expire together.
            remaining = max(0.0, submitted[-1] + deadline - time.monotonic())
            try:
                attempts.append(self._result(future, remaining))
            except concurrent.futures.TimeoutError:
                settled = None
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
                settled = None
                attempts.append(_synthetic(row, attempt, "cancelled", "the rollout was cancelled"))
            except RolloutLoopStopped as exc:
                settled = None
                attempts.append(_synthetic(row, attempt, "rollout_loop_stopped", str(exc)))
            except Exception as exc:
                settled = None
                attempts.append(
                    _synthetic(row, attempt, "plugin_error", f"{type(exc).__name__}: {exc}")
                )
            finally:
                scheduler.forget(future_key)
        verdict = self._settled_verdict(settled) if settled is not None else None
        if _name_blocked_loop(scheduler, attempts, submitted) and verdict is not None:
            verdict.record = None  # built before the attempts were told of the block
        self._consumed.add(key)
        self._top_up()
        return verdict if verdict is not None else self._verdict(attempts)

    def _settle_auto_rows(self, refs: list[tuple[str, RowRef]]) -> None:
        """After ``auto``'s rounds, decide, journal and hand over each row as if its attempts
        had just finished (a row stopped by ``-x`` before its item ran still counts)."""
        assert self.engine is not None
        scheduler = self.engine.scheduler
        for key, ref in refs:
            futures = [scheduler.future(f"{key}#{a}") for a in range(self.row_attempts(key))]
            journal = (ref.dataset, ref.row.key) if ref.dataset is not None else None
            self._when_done(
                key, [f for f in futures if f is not None], journal=journal, watcher=self.watcher
            )

    def row_attempts(self, key: str) -> int:
        """How many attempts the row under ``key`` gets: ``--osmosis-n``, or what auto gave it."""
        return self.auto.attempts_for(key) if self.auto is not None else self.settings.n

    def _verdict(self, attempts: list[AttemptResult]) -> RowVerdict:
        settings = self.settings
        return row_verdict(
            attempts,
            settings.pass_threshold,
            settings.row_pass,
            ungraded_passes=not settings.pass_threshold_set,
        )

    @staticmethod
    def _settled_verdict(
        settled: concurrent.futures.Future[RowVerdict | None],
    ) -> RowVerdict | None:
        """The verdict decided where the row's last attempt finished (it is being decided now:
        every attempt's result is in), or None to decide it here."""
        try:
            return settled.result(timeout=ITEM_GRACE_SEC)
        except concurrent.futures.TimeoutError:
            return None

    def _result(self, future: concurrent.futures.Future[AttemptResult], timeout: float) -> Any:
        """``future.result(timeout)``, running the rollouts meanwhile (on this thread: see
        :meth:`RolloutScheduler.wait`) and letting the watcher draw while it waits."""
        assert self.engine is not None
        scheduler = self.engine.scheduler
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

    def close(self) -> None:
        """Cancel what still runs and stop every server and thread this session started."""
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.stop()

    # -- hooks -----------------------------------------------------------------------------

    def pytest_sessionstart(self) -> None:
        """Forget a previous run's journal in a reused output directory (unless resuming), and
        show live progress while rows run (controller only; the terminal exists by now)."""
        if is_worker(self.config) or not self.settings.active:
            return
        if not self.settings.resume and not self.config.option.collectonly:
            for name in (JOURNAL_FILENAME, "run.json"):
                (self.output / name).unlink(missing_ok=True)
        from pytest_osmosis.live import start_live_progress

        def running() -> int:
            engine = self.engine
            return engine.scheduler.running if engine is not None else 0

        self.watcher = start_live_progress(
            self.config, self.settings.progress, self.settings.progress_interval, running
        )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        self.signals.install()
        try:
            self._start_rows(session)
            return (yield)
        finally:
            self.signals.restore()
            self.close()

    def _start_rows(self, session: pytest.Session) -> None:
        """Start the selected rows' rollouts ahead of pytest's in-order reporting."""
        if self.config.option.collectonly or is_worker(self.config):
            return
        rows = [item for item in session.items if _row_ref(item) is not None]
        if not rows:
            return
        self._redact_pytest_logs()
        try:
            # Loaded first: a usage error must not leave a run directory behind.
            self.ensure_engine()
        except pytest.UsageError as exc:
            pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
        except Exception:
            return
        selected = [item.nodeid for item in rows if _row_dataset(item) is not None]
        self.selected = list(dict.fromkeys([*self.resumed, *selected]))
        if self.selected:
            self._write_run_file(finished=None)
        try:
            if self.settings.n_auto:  # issue 29: every row's attempts, in rounds, first
                from pytest_osmosis.auto_repeats import AutoRow, run_rounds

                refs = [(item.nodeid, ref) for item in rows if (ref := _row_ref(item))]
                self.auto = run_rounds(
                    self.ensure_engine(),
                    self.settings,
                    [AutoRow(key, ref.row, ref.cassette_key) for key, ref in refs],
                    deadline=self.item_deadline(),
                )
                self._settle_auto_rows(refs)
            self.run_ahead([functools.partial(self._submit_item, item) for item in rows])
        except pytest.UsageError as exc:
            # A user mistake (no policy, a broken entrypoint): say it once and stop.
            pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
        except Exception:
            # The session remembers the engine's error; every row reports it when it runs.
            return

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> None:
        """Under xdist, start the rollouts of every row queued on this worker, not just this one."""
        if not is_worker(self.config):
            return
        queued: list[int] = []
        for plugin in self.config.pluginmanager.get_plugins():
            if type(plugin).__name__ == "WorkerInteractor":
                torun = getattr(plugin, "torun", None)
                if torun is not None:
                    with torun.lock() as pending:
                        queued = [i for i in pending if isinstance(i, int)]
        items = item.session.items
        candidates = [item, *(items[i] for i in queued if i < len(items))]
        try:
            with self.ensure_engine().scheduler.batch():
                for candidate in candidates:
                    self._submit_item(candidate)
        except Exception:
            return

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """Move a finished row's record from the item onto its call report."""
        report = yield
        if report.when == "call" and RECORD_KEY in item.stash:
            record = item.stash[RECORD_KEY]
            del item.stash[RECORD_KEY]
            # Where the row ran: journal it again if its report changed it.
            if self._journal(record, reported=True):
                self._in_journal.add(item.nodeid)
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
            setattr(report, WORD_ATTR, reward_word(value, self.settings.pass_threshold))
        self._redact_report(report)
        return report

    def pytest_report_teststatus(
        self, report: pytest.TestReport
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        """``-v`` shows a row's reward beside its outcome: ``PASSED reward=1.0``."""
        word = getattr(report, WORD_ATTR, None)
        if report.when != "call" or not isinstance(word, str) or report.outcome == "skipped":
            return None
        if self._summary_started:
            return None  # pytest's short summary keeps its own "FAILED nodeid - message" lines
        if report.passed:
            return "passed", ".", (f"PASSED {word}", {"green": True})
        return "failed", "F", (f"FAILED {word}", {"red": True})

    def _write_run_file(self, finished: dict[str, Any] | None) -> None:
        write_run_file(
            self.output,
            config=self.redactor.redact_value(self.describe()),
            selected=self.selected,
            finished=finished,
            resumed_from=self.resumed,
        )

    def _rollouts_loop(self) -> asyncio.AbstractEventLoop | None:
        engine = self.engine
        return engine.scheduler.loop if engine is not None else None

    def _redact_pytest_logs(self) -> None:
        """Make pytest's log file, live logs and captured-log sections redact secrets, and
        leave the rollouts' own log records to ``rollouts.log``.

        pytest hangs its handlers on every logger that does not propagate, the one the engine
        routes to ``rollouts.log`` included: without the filter, each record a rollout logs
        on another thread would also land in whichever item pytest runs at that moment.
        """
        logging_plugin = self.config.pluginmanager.get_plugin("logging-plugin")
        leave_out = _RolloutRecords(threading.get_ident(), self._rollouts_loop)
        for name in _PYTEST_LOG_HANDLERS:
            handler = getattr(logging_plugin, name, None)
            if isinstance(handler, logging.Handler):
                redact_handler(handler, self.redactor)
                handler.addFilter(leave_out)

    def _redact_report(self, report: pytest.TestReport) -> None:
        """Keep secrets out of a report's failure text, captured output and properties."""
        if not self.redactor:
            return
        redact = self.redactor.redact
        if isinstance(report.longrepr, str):
            report.longrepr = redact(report.longrepr)
        elif report.longrepr is not None:
            text = str(report.longrepr)
            redacted = redact(text)
            if redacted != text:
                report.longrepr = redacted
        # In place, replacing only what changed: pytest keeps every report for the session,
        # and an unchanged entry stays shared with the item's own list.
        for i, (title, content) in enumerate(report.sections):
            clean = redact(content)
            if clean is not content:
                report.sections[i] = (title, clean)
        for i, (name, value) in enumerate(report.user_properties):
            if value is None or isinstance(value, bool | int | float):
                continue
            clean_value = (
                redact(value) if isinstance(value, str) else self.redactor.redact_value(value)
            )
            if clean_value is not value:
                report.user_properties[i] = (name, clean_value)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """On ``--osmosis-resume``, leave out the rows the run's journal already holds."""
        if not self.settings.resume or is_worker(config):
            return
        try:
            run = read_run_file(self.output)
            journaled, _ = read_journal(self.output / JOURNAL_FILENAME)
        except RunJournalError as exc:
            raise pytest.UsageError(f"--osmosis-resume: {exc}") from exc
        done = {r.nodeid for r in journaled if len(r.attempts) >= self.settings.n}
        keep = [item for item in items if item.nodeid not in done or _row_ref(item) is None]
        skipped = [item for item in items if item.nodeid in done and _row_ref(item) is not None]
        if skipped:
            config.hook.pytest_deselected(items=skipped)
            items[:] = keep
        previous = [n for n in run.get("selected") or [] if isinstance(n, str)]
        self.resumed = list(dict.fromkeys([*previous, *(r.nodeid for r in journaled)]))
        self.resumed_done = len(done)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each row's record from its report (controller only; workers' reports arrive here)."""
        if is_worker(self.config):
            return
        value = getattr(report, REPORT_ATTR, None)
        if report.when != "call" or not isinstance(value, dict):
            return
        record = RowRecord(
            nodeid=value["nodeid"],
            dataset=value["dataset"],
            row_key=value["row_key"],
            verdict=value["verdict"],
            attempts=value["attempts"],
            stats=value.get("stats", {}),
        )
        # A row this process journaled as reported is read back from the journal at the end:
        # the report keeps nothing of it meanwhile.
        journaled = record.nodeid in self._in_journal
        self._in_journal.discard(record.nodeid)
        self.report.add(record, journaled=journaled)
        # pytest keeps every report for the session: do not keep the record twice.
        delattr(report, REPORT_ATTR)
        hook = self.config.hook.pytest_osmosis_row_finished
        if hook.get_hookimpls():
            hook(
                row={"nodeid": record.nodeid, "dataset": record.dataset, "row_key": record.row_key},
                result={
                    "verdict": record.verdict,
                    "attempts": record.attempts,
                    "stats": record.stats,
                },
                report=report,
            )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Say how the run ended, write the report files and apply the gates (controller only).

        The report is built from the journal, so rows that finished but were never reported
        (after ``-x`` or a signal) count, and the rows that never ran are named. A file that
        cannot be written is reported after the summary; it does not change the exit status.
        """
        config = self.config
        if is_worker(config) or config.option.collectonly:
            return
        report = self.report
        report.close()
        if not report.reported and not self.selected:
            return
        from pytest_osmosis.gates import apply_gates

        finished = how_it_ended(session, int(exitstatus), self.signals.received)
        report.finish(selected=self.selected, finished=finished)
        settings = self.settings
        baseline = resolve_path(config, settings.baseline) if settings.baseline else None
        gates = apply_gates(
            settings,
            report,
            baseline=baseline,
            testsfailed=session.testsfailed,
            exitstatus=int(exitstatus),
        )
        # The report's rows are streamed from the journal into each file, never all at once.
        head = report.head(gates.extra)
        writes = [
            OutputWrite(
                "run file",
                str(self.output / "run.json"),
                functools.partial(
                    self._write_run_file, {**finished, "preflight": report.preflight}
                ),
            ),
            OutputWrite(
                "JSON report",
                str(self.output / "report.json"),
                functools.partial(report.write_json, self.output / "report.json", head),
            ),
        ]
        if settings.report:
            report_path = resolve_path(config, settings.report)
            writes.append(
                OutputWrite(
                    "JSON report",
                    settings.report,
                    functools.partial(report.write_json, report_path, head),
                )
            )
        if settings.html:
            from pytest_osmosis.html import write_html

            html_path = resolve_path(config, settings.html)

            def html() -> None:
                write_html(html_path, head, report.row_groups)

            writes.append(OutputWrite("HTML report", settings.html, html))
        written, failures = write_outputs(writes)
        report.release_files()
        self.result = {
            "summary": head["summary"],
            # Read from the journal now: a run-finished hook may move the run directory.
            "segments": summary_segments(report, head["summary"]),
            "not_run": head["not_run"],
            "gate_lines": gates.lines,
            "verdicts": gates.verdicts,
            "paths": [str(resolve_path(config, w)) for w in written if not w.endswith("run.json")],
            "write_failures": failures,
        }
        if gates.exit_override is not None:
            session.exitstatus = gates.exit_override
        report_json = str(self.output / "report.json")
        config.hook.pytest_osmosis_run_finished(
            summary=head["summary"], report_path=report_json if report_json in written else None
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self._summary_started = True
        result = self.result
        if result is None:
            return
        terminalreporter.section("osmosis summary")
        for segments in result["segments"]:
            for text, markup in segments:
                terminalreporter.write(text, **markup)
            terminalreporter.line("")
        for line in incomplete_lines(result["summary"], result["not_run"]):
            terminalreporter.write_line(line, red=True, bold=True)
        for line in result["gate_lines"]:
            terminalreporter.write_line(line, red=line.lstrip().startswith("REGRESSED"))
        if self.resumed_done:
            terminalreporter.write_line(
                f"resumed: {self.resumed_done} rows already in "
                f"{self.output / JOURNAL_FILENAME} were not run again"
            )
        for path in result["paths"]:
            terminalreporter.write_line(f"report: {path}")
        for line in result["write_failures"]:
            terminalreporter.write_line(line, red=True)
        # The verdicts come last: the line a reader looks for, just before pytest's own.
        for line, passed in result["verdicts"]:
            terminalreporter.write_line(line, green=passed, red=not passed, bold=True)

    def pytest_report_header(self) -> list[str] | None:
        if not self.settings.active:
            return None
        d = self.describe()
        return [
            f"osmosis: {d['mode']}, rollout {d['entrypoint'] or ', '.join(d['servers'])}, "
            f"policy {d['policy'] or 'replay/config'}, threshold {d['pass_threshold']:g}, n {d['n']}"
            + (f", concurrency {d['concurrency']}" if d["concurrency"] else ""),
            f"osmosis output: {d['output']}",
        ]

    def pytest_unconfigure(self) -> None:
        self.close()
        self.report.close()


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


class _RolloutRecords(logging.Filter):
    """Drops ``osmosis_rollout``'s records logged by the rollouts (off the thread that runs
    pytest's items, or on it while it runs the rollouts' loop) while that logger keeps its
    records to itself (the engine's route to ``rollouts.log``)."""

    def __init__(
        self, items_thread: int, rollouts_loop: Callable[[], asyncio.AbstractEventLoop | None]
    ) -> None:
        super().__init__()
        self.items_thread = items_thread
        self.rollouts_loop = rollouts_loop
        self.logger = logging.getLogger("osmosis_rollout")

    def filter(self, record: logging.LogRecord) -> bool:
        if self.logger.propagate or not (
            record.name == "osmosis_rollout" or record.name.startswith("osmosis_rollout.")
        ):
            return True
        if record.thread is None:
            return True
        if record.thread != self.items_thread:
            return False
        # Logged now, on this thread (filters run where the record is made).
        running = asyncio._get_running_loop()
        return running is None or running is not self.rollouts_loop()


def _row_dataset(item: pytest.Item) -> str | None:
    ref = _row_ref(item)
    return ref.dataset if ref is not None else None


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
