"""The plugin's per-session state: settings, the runtime it builds lazily, and the run's report.

One :class:`OsmosisSession` lives on ``config.stash[SESSION_KEY]``. Collection only reads
datasets (cheap: ``--co`` never imports the rollout or starts a server); the first item to
run builds the runtime: imports the entrypoint, starts the policy endpoint, opens the
scheduler, and submits every selected row's attempts.
"""

from __future__ import annotations

import collections
import concurrent.futures
import datetime as dt
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_osmosis.options import OsmosisSettings, resolve_path
from pytest_osmosis.outcome import AttemptResult, RowVerdict, row_verdict
from pytest_osmosis.reporting import RunReport
from pytest_osmosis.runtime import AttemptRunner, RunPaths
from pytest_osmosis.scheduler import RolloutLoopStopped, RolloutScheduler

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.collection import RowItem

ITEM_GRACE_SEC = 60.0
UNBOUNDED_ITEM_DEADLINE_SEC = 3600.0


@dataclass
class Runtime:
    """What the first running item builds: scheduler, runner and the things to stop."""

    scheduler: RolloutScheduler
    runner: AttemptRunner
    closers: list[Any] = field(default_factory=list)
    loop_closers: list[Any] = field(default_factory=list)
    """Run while the scheduler's loop still runs (e.g. closing HTTP clients made on it)."""


class OsmosisSession:
    """Everything pytest-osmosis knows during one pytest session."""

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
        self.runtime: Runtime | None = None
        self.runtime_error: BaseException | None = None
        self._ahead: collections.deque[Callable[[], None]] = collections.deque()
        self._consumed: set[str] = set()

    def _output_dir(self) -> Path:
        if self.settings.output:
            return resolve_path(self.config, self.settings.output)
        base = self.workspace or Path(self.config.rootpath)
        return base / ".osmosis" / "runs" / self.run_name

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

    # -- running ---------------------------------------------------------------------------

    def item_deadline(self) -> float:
        """How long an item waits for one attempt (the official eval's item deadline)."""
        s = self.settings
        if s.agent_timeout is not None and s.grader_timeout is not None:
            return s.agent_timeout + s.grader_timeout + ITEM_GRACE_SEC
        return UNBOUNDED_ITEM_DEADLINE_SEC

    def ensure_runtime(self) -> Runtime:
        """Build the runtime on first use; a failure is remembered and reported by every row."""
        if self.runtime is not None:
            return self.runtime
        if self.runtime_error is not None:
            raise self.runtime_error
        from osmosis_rollout.errors import UsageError
        from pytest_osmosis.build import build_runtime

        try:
            self.runtime = build_runtime(self)
        except UsageError as exc:
            # A missing extra, a bad entrypoint: the user's to fix, said once.
            self.runtime_error = pytest.UsageError(f"pytest-osmosis: {exc}")
            raise self.runtime_error from exc
        except BaseException as exc:
            self.runtime_error = exc
            raise
        return self.runtime

    def run_ahead(self, submits: list[Callable[[], None]]) -> None:
        """Queue row submissions in item order and start the first window of them.

        The window (four times the concurrency, at least 64 rows) keeps every slot busy while
        pytest reports in order, without holding thousands of pending rollouts in memory;
        each finished row tops it up.
        """
        self._ahead.extend(submits)
        self._top_up()

    def _window(self) -> int:
        runtime = self.ensure_runtime()
        return max(64, 4 * runtime.scheduler.concurrency)

    def _top_up(self) -> None:
        if not self._ahead:
            return
        window = self._window()
        assert self.runtime is not None
        while self._ahead and self.runtime.scheduler.pending() < window:
            self._ahead.popleft()()

    def submit(self, item: RowItem) -> None:
        """Start every attempt of ``item``'s row (idempotent)."""
        self.submit_row(item.nodeid, item.row, cassette_key=item.cassette_key)

    def submit_row(self, key: str, row: DatasetRow, *, cassette_key: str | None = None) -> None:
        """Start every attempt of ``row`` under ``key`` (idempotent; never after it was consumed)."""
        runtime = self.ensure_runtime()
        if key in self._consumed:
            return
        runner = runtime.runner
        for attempt in range(self.settings.n):
            runtime.scheduler.submit(
                f"{key}#{attempt}",
                functools.partial(
                    runner.run_attempt, row, attempt, cassette_key=cassette_key or row.key
                ),
            )

    def wait(self, item: RowItem) -> RowVerdict:
        """Wait for ``item``'s attempts and return the row's verdict."""
        return self.wait_for_row(item.nodeid, item.row, cassette_key=item.cassette_key)

    def wait_for_row(
        self, key: str, row: DatasetRow, *, cassette_key: str | None = None
    ) -> RowVerdict:
        """Wait for the attempts submitted under ``key`` (submitting them if needed)."""
        self.submit_row(key, row, cassette_key=cassette_key)
        assert self.runtime is not None
        scheduler = self.runtime.scheduler
        deadline = self.item_deadline()
        attempts: list[AttemptResult] = []
        for attempt in range(self.settings.n):
            future_key = f"{key}#{attempt}"
            future = scheduler.future(future_key)
            assert future is not None
            # Counted from submission, so rows that hang together expire together.
            remaining = max(0.0, scheduler.submitted_at(future_key) + deadline - time.monotonic())
            try:
                attempts.append(future.result(timeout=remaining))
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
        self._consumed.add(key)
        self._top_up()
        return row_verdict(attempts, self.settings.pass_threshold, self.settings.row_pass)

    def close(self) -> None:
        """Cancel what still runs and stop every server and thread this session started."""
        runtime, self.runtime = self.runtime, None
        if runtime is None:
            return
        runtime.scheduler.cancel_pending()
        for closer in [*runtime.loop_closers, runtime.scheduler.close, *reversed(runtime.closers)]:
            try:
                closer()
            except Exception:
                pass

    @property
    def paths(self) -> RunPaths:
        return RunPaths(self.output)


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
