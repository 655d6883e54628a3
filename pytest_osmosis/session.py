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

import collections
import concurrent.futures
import datetime as dt
import functools
import os
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_osmosis.keys import (
    RECORD_KEY,
    REPORT_ATTR,
    ROW_KEY,
    SESSION_PLUGIN,
    WORD_ATTR,
    RowRef,
)
from pytest_osmosis.options import OsmosisSettings, resolve_path, resolve_settings
from pytest_osmosis.reporting import RowRecord, RunReport, reward_word, summary_segments
from pytest_osmosis.runners import RunPaths
from pytest_osmosis.scheduler import RolloutLoopStopped, RolloutScheduler
from pytest_osmosis.verdict import AttemptResult, RowVerdict, row_verdict

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.engine import Engine

ITEM_GRACE_SEC = 60.0
WAIT_TICK_SEC = 0.1
"""How often a waiting item lets the live progress redraw."""
UNBOUNDED_ITEM_DEADLINE_SEC = 3600.0


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
        self.report = RunReport(
            self.output, pass_threshold=settings.pass_threshold, settings=self.describe()
        )
        self.engine: Engine | None = None
        self.engine_error: BaseException | None = None
        self.result: dict[str, Any] | None = None
        """What ``pytest_sessionfinish`` computed for the terminal summary."""
        self._ahead: collections.deque[Callable[[], None]] = collections.deque()
        self._consumed: set[str] = set()
        self._summary_started = False
        self._watched: set[str] = set()
        self.watcher: RowWatcher | None = None
        """Told when a row's rollouts finish and while an item waits (the live progress)."""

    def register(self) -> None:
        """Register this session as the ``osmosis-session`` plugin."""
        self.config.pluginmanager.register(self, SESSION_PLUGIN)

    def _output_dir(self) -> Path:
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
            "n": s.n,
            "row_pass": s.row_pass.describe(),
            "concurrency": s.concurrency,
            "agent_timeout": s.agent_timeout,
            "grader_timeout": s.grader_timeout,
            "min_pass_rate": s.min_pass_rate,
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
                self.config, self.settings, output=self.output, entrypoint=self.entrypoint
            )
        except UsageError as exc:
            # A missing extra, a bad entrypoint: the user's to fix, said once.
            self.engine_error = pytest.UsageError(f"pytest-osmosis: {exc}")
            raise self.engine_error from exc
        except BaseException as exc:
            self.engine_error = exc
            raise
        self.entrypoint = self.engine.entrypoint
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
        if not self._ahead:
            return
        window = self._window()
        assert self.engine is not None
        while self._ahead and self.engine.scheduler.pending() < window:
            self._ahead.popleft()()

    def submit_row(self, key: str, row: DatasetRow, *, cassette_key: str | None = None) -> None:
        """Start every attempt of ``row`` under ``key`` (idempotent; never after it was consumed)."""
        engine = self.ensure_engine()
        if key in self._consumed:
            return
        runner = engine.runner
        futures = [
            engine.scheduler.submit(
                f"{key}#{attempt}",
                functools.partial(
                    runner.run_attempt, row, attempt, cassette_key=cassette_key or row.key
                ),
            )
            for attempt in range(self.settings.n)
        ]
        if self.watcher is not None:
            self._watch(key, futures)

    def _watch(self, key: str, futures: list[concurrent.futures.Future[Any]]) -> None:
        """Tell the watcher the row's verdict as soon as its last attempt finishes."""
        watcher = self.watcher
        assert watcher is not None
        if key in self._watched:
            return  # submitted again by the item that waits for it: already watched
        self._watched.add(key)
        left = [len(futures)]
        lock = threading.Lock()

        def done(_: concurrent.futures.Future[Any]) -> None:
            with lock:
                left[0] -= 1
                if left[0]:
                    return
            results = [f.result() for f in futures if not f.cancelled() and f.exception() is None]
            if len(results) == len(futures):
                verdict = row_verdict(results, self.settings.pass_threshold, self.settings.row_pass)
                watcher.row_done(key, verdict)

        for future in futures:
            future.add_done_callback(done)

    def _submit_item(self, item: pytest.Item) -> None:
        ref = _row_ref(item)
        if ref is not None:
            self.submit_row(item.nodeid, ref.row, cassette_key=ref.cassette_key)

    def wait_for_row(
        self, key: str, row: DatasetRow, *, cassette_key: str | None = None
    ) -> RowVerdict:
        """Wait for the attempts submitted under ``key`` (submitting them if needed)."""
        self.submit_row(key, row, cassette_key=cassette_key)
        assert self.engine is not None
        scheduler = self.engine.scheduler
        deadline = self.item_deadline()
        attempts: list[AttemptResult] = []
        submitted: list[float] = []
        for attempt in range(self.settings.n):
            future_key = f"{key}#{attempt}"
            future = scheduler.future(future_key)
            assert future is not None
            submitted.append(scheduler.submitted_at(future_key))
            # Counted from submission, so rows that hang together expire together.
            remaining = max(0.0, submitted[-1] + deadline - time.monotonic())
            try:
                attempts.append(self._result(future, remaining))
            except concurrent.futures.TimeoutError:
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
                attempts.append(_synthetic(row, attempt, "cancelled", "the rollout was cancelled"))
            except RolloutLoopStopped as exc:
                attempts.append(_synthetic(row, attempt, "rollout_loop_stopped", str(exc)))
            except Exception as exc:
                attempts.append(
                    _synthetic(row, attempt, "plugin_error", f"{type(exc).__name__}: {exc}")
                )
            finally:
                scheduler.forget(future_key)
        _name_blocked_loop(scheduler, attempts, submitted)
        self._consumed.add(key)
        self._top_up()
        settings = self.settings
        return row_verdict(
            attempts,
            settings.pass_threshold,
            settings.row_pass,
            ungraded_passes=not settings.pass_threshold_set,
        )

    def _result(self, future: concurrent.futures.Future[AttemptResult], timeout: float) -> Any:
        """``future.result(timeout)``, letting the watcher draw while the main thread waits."""
        watcher = self.watcher
        if watcher is None:
            return future.result(timeout=timeout)
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                try:
                    return future.result(timeout=max(0.0, min(left, WAIT_TICK_SEC)))
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
        """Show live progress while rows run (controller only; the terminal exists by now)."""
        if is_worker(self.config) or not self.settings.active:
            return
        from pytest_osmosis.live import start_live_progress

        def running() -> int:
            engine = self.engine
            return engine.scheduler.running if engine is not None else 0

        self.watcher = start_live_progress(
            self.config, self.settings.progress, self.settings.progress_interval, running
        )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        self._start_rows(session)
        try:
            return (yield)
        finally:
            self.close()

    def _start_rows(self, session: pytest.Session) -> None:
        """Start the selected rows' rollouts ahead of pytest's in-order reporting."""
        if self.config.option.collectonly or is_worker(self.config):
            return
        rows = [item for item in session.items if _row_ref(item) is not None]
        if not rows:
            return
        try:
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
            setattr(report, REPORT_ATTR, record)
            setattr(report, WORD_ATTR, reward_word(record, self.settings.pass_threshold))
            del item.stash[RECORD_KEY]
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
        self.report.add(record)
        # pytest keeps every report for the session: do not keep the record twice.
        delattr(report, REPORT_ATTR)
        self.config.hook.pytest_osmosis_row_finished(
            row={"nodeid": record.nodeid, "dataset": record.dataset, "row_key": record.row_key},
            result={"verdict": record.verdict, "attempts": record.attempts, "stats": record.stats},
            report=report,
        )

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the report files and apply the suite gates (controller only)."""
        config = self.config
        if is_worker(config) or config.option.collectonly or not self.report.rows:
            return
        from pytest_osmosis.gates import apply_gates

        report = self.report
        report.close()
        settings = self.settings
        baseline = resolve_path(config, settings.baseline) if settings.baseline else None
        gates = apply_gates(
            settings,
            report,
            baseline=baseline,
            testsfailed=session.testsfailed,
            exitstatus=int(exitstatus),
        )
        paths = [self.output / "report.json"]
        if settings.report:
            paths.append(resolve_path(config, settings.report))
        document = report.write(gates.extra, paths)
        html_path = None
        if settings.html:
            from pytest_osmosis.html import write_html

            html_path = resolve_path(config, settings.html)
            write_html(html_path, document)
        self.result = {
            "summary": document["summary"],
            "gate_lines": gates.lines,
            "verdicts": gates.verdicts,
            "paths": [str(p) for p in paths] + ([str(html_path)] if html_path else []),
        }
        if gates.exit_override is not None:
            session.exitstatus = gates.exit_override
        config.hook.pytest_osmosis_run_finished(
            summary=document["summary"], report_path=str(paths[0])
        )

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self._summary_started = True
        result = self.result
        if result is None:
            return
        terminalreporter.section("osmosis summary")
        for segments in summary_segments(self.report, result["summary"]):
            for text, markup in segments:
                terminalreporter.write(text, **markup)
            terminalreporter.line("")
        for line in result["gate_lines"]:
            terminalreporter.write_line(line, red=line.lstrip().startswith("REGRESSED"))
        for path in result["paths"]:
            terminalreporter.write_line(f"report: {path}")
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
) -> None:
    """Tell each failed attempt when something blocked the loop while it was in flight."""
    now = time.monotonic()
    for attempt, started in zip(attempts, submitted, strict=True):
        if attempt.status != "failed":
            continue
        blocks = scheduler.blocks_between(started, now)
        if blocks:
            attempt.blocked_loop = max(blocks, key=lambda b: b.seconds).describe()


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
