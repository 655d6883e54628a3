"""The session: owns a run's state (settings, folder, engine) and registers the plugin
objects that own the rest.

An :class:`OsmosisSession` is registered as the ``"osmosis-session"`` plugin (as pytest's own
``LFPlugin`` is): at ``pytest_configure`` when datasets are configured, else once collection
finds a test marked ``@pytest.mark.osmosis_dataset``. Beside itself it registers one plugin
object per concern (:meth:`~OsmosisSession.register`). Collection only reads datasets; the
engine starts when the run loop begins.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
import secrets
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from osmosis_rollout.errors import RunFolderError
from osmosis_rollout.redaction import Redactor, redact_url
from pytest_osmosis.keys import DATASETS_KEY, SESSION_PLUGIN, WORKER_RUN_NAME, row_ref
from pytest_osmosis.options import OsmosisSettings, resolve_path, resolve_settings
from pytest_osmosis.results.report import RunReport
from pytest_osmosis.results.report_redaction import REDACTION_PLUGIN, ReportRedaction
from pytest_osmosis.results.resume import RESUME_PLUGIN, Resume, row_fingerprint, run_fingerprint
from pytest_osmosis.results.rows import RowBook
from pytest_osmosis.results.run_end import SUMMARY_PLUGIN, RunSummary
from pytest_osmosis.results.run_folder import RunFolder
from pytest_osmosis.run.policy_choice import cassette_dir, replays
from pytest_osmosis.run.row_runner import ITEM_GRACE_SEC, ROWS_PLUGIN, RowRunner
from pytest_osmosis.run.xdist_run import XDIST_PLUGIN, XdistRun
from pytest_osmosis.signals import SignalWatch

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.run.engine import Engine

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


class OsmosisSession:
    """The run's settings, folder and engine; the other concerns are its plugin objects."""

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
        self.entrypoint = entrypoint
        self.eval_config = eval_config
        self.is_worker = is_worker(config)
        # Under xdist, workers write into the controller's run directory. Two runs in one
        # second of one process (pytester, a plugin re-running pytest) get their own id.
        self.run_name = getattr(config, "workerinput", {}).get(WORKER_RUN_NAME) or (
            dt.datetime.now().strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{secrets.token_hex(2)}"
        )
        named = settings.resume or settings.output
        self.output = (
            resolve_path(config, named)
            if named
            else (workspace or Path(config.rootpath)) / ".osmosis" / "runs" / self.run_name
        )
        self.folder = RunFolder(
            self.output,
            run_id=self.run_name,
            flag="--osmosis-resume" if settings.resume else "--osmosis-output",
        )
        self.redactor = Redactor.from_environment()
        self.report = RunReport(
            self.output,
            pass_threshold=settings.pass_threshold,
            settings=self.describe(),
            redactor=self.redactor,
            # Workers append to the controller's journal; a resumed run continues its own.
            resume=bool(settings.resume) or self.is_worker,
            run_id=self.run_name,
        )
        self.signals = SignalWatch()
        self.selected: list[str] = []
        """Node ids of the rows this run set out to run, in item order (controller)."""
        self.engine: Engine | None = None
        self.engine_error: BaseException | None = None
        self.auto: dict[str, int] | None = None
        """``--osmosis-n auto``: how many attempts each row got, by node id (issue 29)."""
        self.log_failure: str | None = None
        """Why ``rollouts.log`` stopped being written, if it did."""
        self.book = RowBook(self.report.journal, self.folder)
        self.rows = RowRunner(self, self.book)
        self.resume = Resume(self)
        self.summary = RunSummary(self)
        self.redaction = ReportRedaction(config, self.redactor)
        self.xdist = XdistRun(self)

    def register(self) -> None:
        """Register this session as the ``osmosis-session`` plugin, and its plugin objects."""
        manager = self.config.pluginmanager
        manager.register(self, SESSION_PLUGIN)
        manager.register(self.rows, ROWS_PLUGIN)
        manager.register(self.resume, RESUME_PLUGIN)
        manager.register(self.summary, SUMMARY_PLUGIN)
        manager.register(self.redaction, REDACTION_PLUGIN)
        manager.register(self.xdist, XDIST_PLUGIN)

    def describe(self) -> dict[str, Any]:
        """The run's configuration, as the report header and JSON report show it."""
        s = self.settings
        return {
            "datasets": list(s.datasets),
            "entrypoint": self.entrypoint,
            "eval_config": str(self.eval_config) if self.eval_config else None,
            "mode": "server" if (s.servers or s.serve) else "in-process",
            "servers": [redact_url(url) for url in s.servers],
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
            "gate_confidence": s.gate_confidence,
            "gate_undecided": s.gate_undecided,
            "baseline": s.baseline,
            "allow_partial_baseline": s.allow_partial_baseline,
            "fail_on_regression": s.fail_on_regression,
            "require_grader": s.require_grader,
            "output": str(self.output),
        }

    @functools.cached_property
    def _run_fingerprint(self) -> dict[str, Any]:
        """The run-wide part of every row's fingerprint."""
        described = self.describe()
        datasets = self.config.stash.get(DATASETS_KEY, set())
        return run_fingerprint(
            entrypoint=self.entrypoint,
            policy=described["policy"],
            pass_threshold=self.settings.pass_threshold,
            row_pass=described["row_pass"],
            n=self.settings.n,
            base=Path(self.config.invocation_params.dir),
            # Each row has its own digest; cassettes change as they are recorded.
            skip=[self.output, cassette_dir(self.config, self.settings), *datasets],
        )

    def fingerprint(self, row: DatasetRow) -> dict[str, Any]:
        """What ``row``'s result depends on, as its journal lines carry it."""
        return row_fingerprint(self._run_fingerprint, row)

    def write_run_file(self, finished: dict[str, Any] | None) -> None:
        """Write ``run.json``: the configuration, the selected rows, how the run ended."""
        plan = self.resume.plan
        self.folder.write_run_file(
            config=self.redactor.redact_value(self.describe()),
            selected=self.selected,
            finished=finished,
            kept=plan.kept if plan is not None else (),
            resume=plan.describe() if plan is not None else None,
        )

    def set_out(self, selected: list[str]) -> None:
        """The run sets out to run ``selected`` (a fresh run clears an earlier one's files)."""
        self.selected = selected
        if not selected:
            return
        self.folder.start(fresh=not self.settings.resume)
        try:
            self.write_run_file(finished=None)
        except OSError as exc:
            self.folder.write_failed(exc, "run.json")

    # -- the engine ------------------------------------------------------------------------

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
        from pytest_osmosis.run.engine import start_engine

        try:
            self.engine = start_engine(
                self.config,
                self.settings,
                output=self.output,
                entrypoint=self.entrypoint,
                redactor=self.redactor,
                on_write_failure=self.folder.file_failed,
            )
        except UsageError as exc:
            # A missing extra, a bad entrypoint: the user's to fix, said once.
            self.engine_error = pytest.UsageError(f"pytest-osmosis: {exc}")
            raise self.engine_error from exc
        except BaseException as exc:
            self.engine_error = exc
            raise
        self.entrypoint = self.engine.entrypoint
        # A loop blocked as long as an item may wait is given up: the rows left fail at once.
        self.engine.scheduler.block_limit = self.item_deadline()
        return self.engine

    def close(self) -> None:
        """Cancel what still runs and stop every server and thread this session started."""
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.stop()
            self.log_failure = engine.log.failure

    # -- hooks -----------------------------------------------------------------------------

    def pytest_sessionstart(self) -> None:
        """Claim the run folder (controller only) and show live progress while rows run."""
        if self.is_worker or not self.settings.active:
            return
        self.signals.install()  # SIGTERM while collecting stops the run as Ctrl-C does too
        if not self.config.option.collectonly:
            try:
                self.folder.claim(
                    resume=bool(self.settings.resume),
                    # The default folder is new for each run; one named may hold an earlier
                    # run, which a run replaces only when asked.
                    overwrite=self.settings.overwrite or not self.settings.output,
                )
            except RunFolderError as exc:
                raise pytest.UsageError(f"pytest-osmosis: {exc}") from exc
        from pytest_osmosis.display.live import start_live_progress

        self.rows.watcher = start_live_progress(
            self.config,
            self.settings.progress,
            self.settings.progress_interval,
            lambda: self.engine.scheduler.running if self.engine is not None else 0,
        )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        self.signals.install()
        try:
            self._start_rows(session)
            return (yield)
        finally:
            self.signals.rows_over()  # a signal from now on must not cut the reports short
            self.close()

    def _start_rows(self, session: pytest.Session) -> None:
        """Start the selected rows' rollouts ahead of pytest's in-order reporting."""
        if self.config.option.collectonly:
            return
        if self.is_worker:
            # A worker runs rows too (RowRunner starts its queue): its log handlers must
            # redact and leave other rows' records out of each item's captured log as well.
            self.redaction.redact_pytest_logs()
            return
        refs = [(item, ref) for item in session.items if (ref := row_ref(item)) is not None]
        plan = self.resume.plan
        previous = plan.previous if plan is not None else []
        if not refs:
            # A resume with nothing left still reports every row of the run.
            self.set_out(list(previous))
            return
        self.redaction.redact_pytest_logs()
        try:
            # Loaded first: a usage error must not leave a run directory behind.
            engine = self.ensure_engine()
        except pytest.UsageError:
            raise  # pytest says it as "ERROR: ..." with exit 4, as for one raised at start-up
        except Exception:
            return  # remembered: every row reports it when it runs
        selected = [item.nodeid for item, ref in refs if ref.dataset is not None]
        self.set_out(list(dict.fromkeys([*previous, *selected])))
        try:
            if self.settings.n_auto:  # issue 29: every row's attempts, in rounds, first
                from pytest_osmosis.run.auto_repeats import run_rounds

                self.auto = run_rounds(engine, self.settings, refs, deadline=self.item_deadline())
                # Every row's attempts are done: decide and journal each now, as if they had
                # just finished (a run stopped by -x still reports every row auto ran).
                for item, _ in refs:
                    self.rows.submit_item(item)
            self.rows.run_ahead([item for item, _ in refs])
        except pytest.UsageError:
            raise  # a user mistake found late (a broken entrypoint): said once, as one
        except Exception:
            return  # the session remembers the engine's error; every row reports it

    def _record_mode(self) -> str:
        """What the header says of the cassettes: replay only (the policy is never called)
        with ``none`` and cassettes to replay; with none recorded, the policy answers."""
        mode = self.settings.record_mode
        if mode is None:
            return ""
        if mode != "none":
            return f", record mode {mode}"
        if replays(self.settings, cassette_dir(self.config, self.settings)):
            return ", replay only (record mode none)"
        return ", record mode none (no cassettes: the policy answers)"

    def pytest_report_header(self) -> list[str] | None:
        if not self.settings.active:
            return None
        d = self.describe()
        return [
            f"osmosis: {d['mode']}, rollout {d['entrypoint'] or ', '.join(d['servers'])}, "
            f"policy {d['policy'] or 'replay/config'}{self._record_mode()}, "
            f"threshold {d['pass_threshold']:g}, n {d['n']}"
            + (f", concurrency {d['concurrency']}" if d["concurrency"] else ""),
            f"osmosis output: {d['output']}",
        ]

    def pytest_unconfigure(self) -> None:
        self.close()
        self.report.close()
        self.folder.release()
        self.signals.restore()
        session = self.config.pluginmanager.get_plugin("session")
        if session is not None:  # a signal while pytest wrote its reports: still interrupted
            session.exitstatus = self.signals.exit_status(session.exitstatus)
