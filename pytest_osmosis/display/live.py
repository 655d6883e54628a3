"""The live progress display wired into a pytest session (controller only).

:class:`LiveProgress` counts a row when its rollouts finish (on the rollouts' thread, so one slow
early row does not hold the count back) and again, authoritatively, from its report (the only
way under pytest-xdist). It draws only while pytest is not writing (in-process while the main
thread waits for a row, capture suspended as live logging does; under xdist after pytest wrote
an item's result) and erases its line before any hook through which pytest writes.
"""

from __future__ import annotations

import collections
import contextlib
import os
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, Literal

import pytest

from osmosis_rollout.runs.report_model import RowRecord
from pytest_osmosis.display.progress import ProgressDisplay, ProgressState, Terminal
from pytest_osmosis.keys import DATASETS_KEY, REPORT_ATTR, ROW_KEY

# The attempt fields the progress line counts.
_TALLIED = {"status", "tokens", "tokens_estimated", "cost_usd", "cost_estimated"}


def _erase_first(*, optional: bool = False) -> Any:
    """A hook wrapper that erases the line before pytest writes through that hook."""

    @pytest.hookimpl(wrapper=True, tryfirst=True, optionalhook=optional)
    def hook(self: LiveProgress) -> Generator[None, None, None]:
        self._clear()
        return (yield)

    return hook


class LiveProgress:
    """Counts rows and draws the progress line at the moments pytest leaves free."""

    def __init__(
        self,
        config: pytest.Config,
        mode: Literal["bar", "line"],
        *,
        interval: float,
        running: Callable[[], int],
    ) -> None:
        self.config = config
        self.running = running
        self.state = ProgressState(total=0)
        self.xdist = False
        self._tw = tw = config.get_terminal_writer()
        self._capman = config.pluginmanager.get_plugin("capturemanager")
        self.display = ProgressDisplay(
            self.state,
            Terminal(
                write=self._write_raw if mode == "bar" else lambda text, m: tw.write(text, **m),
                column=lambda: tw.width_of_current_line,
                width=lambda: tw.fullwidth,
                flush=tw.flush,
            ),
            mode=mode,
            interval=interval,
        )
        self._finished: collections.deque[tuple[str, RowRecord]] = collections.deque()

    def _write_raw(self, text: str, markup: dict[str, bool]) -> None:
        # Straight to the stream: pytest's writer must not count our line as its own.
        self._tw._file.write(self._tw.markup(text, **markup) if markup else text)

    def _uncaptured(self, action: Callable[[], Any]) -> None:
        capman = self._capman
        with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
            action()

    def row_done(self, key: str, verdict: RowRecord) -> None:
        """A row's rollouts finished (on the rollouts' thread): count it at the next draw."""
        self._finished.append((key, verdict))

    def waiting(self, *, force: bool = False) -> None:
        """The main thread waits for a row: count what finished and redraw when due; ``force``
        draws at once when the last row is in."""
        self._drain()
        self.state.running = self.running()
        last = force and self.state.done >= self.state.total
        self._uncaptured(lambda: self.display.update(force=last))

    def done_waiting(self) -> None:
        """Pytest is about to write: erase the line."""
        if self.display.shown:
            self._uncaptured(self.display.clear)

    def _drain(self) -> None:
        while self._finished:
            key, verdict = self._finished.popleft()
            attempts = [a.model_dump(include=_TALLIED) for a in verdict.attempts]
            self._count(key, verdict.verdict, attempts)

    def _count(self, key: str, verdict: str, attempts: list[dict[str, Any]]) -> None:
        costs = [a["cost_usd"] for a in attempts if a.get("cost_usd") is not None]
        self.state.row_finished(
            key,
            verdict,
            errored=any(a.get("status") == "failed" for a in attempts),
            tokens=sum(int(a.get("tokens") or 0) for a in attempts),
            tokens_estimated=any(a.get("tokens_estimated") for a in attempts),
            cost=sum(costs) if costs else None,
            cost_estimated=any(a.get("cost_estimated") for a in attempts),
        )

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.state.total = sum(1 for item in session.items if ROW_KEY in item.stash)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtestloop(self) -> Generator[None, object, object]:
        # Inside the other wrappers, so the engine has started: the rate counts from here (not
        # from the first row to finish), and the line is gone before pytest writes its [100%].
        self._clear()
        self.state.start()
        try:
            return (yield)
        finally:
            self._clear()

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        # Every worker collects the same items: the first one's count is the total.
        self.xdist = True
        self.state.running = None
        self.state.started_at = None  # the workers start their rows now, not at the loop's start
        self.state.start()
        if self.state.total:
            return
        datasets = self.config.stash.get(DATASETS_KEY, set())
        root = Path(self.config.rootpath)
        self.state.total = sum(
            1 for nodeid in ids if (root / nodeid.split("::", 1)[0]).resolve() in datasets
        )

    # -- erase before pytest writes, count reports, draw after (xdist) ---------------------

    def _clear(self) -> None:
        if self.display.shown:
            self.display.clear()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        self._clear()
        # Count the rows finished meanwhile first: when the main thread never has to wait,
        # this is the only place their verdicts (answers and all) leave the queue.
        self._drain()
        record = getattr(report, REPORT_ATTR, None)
        if report.when == "call" and isinstance(record, dict):
            key = str(record.get("nodeid", report.nodeid))
            self._count(key, str(record.get("verdict")), record.get("attempts") or [])
        return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self) -> Generator[None, None, None]:
        self._clear()
        try:
            return (yield)
        finally:
            # Pytest wrote an item's result: under xdist the one moment to draw (the controller
            # waits for nothing); in-process, fast rows that never make the main thread wait
            # still get their lines, but only when due: suspending capture costs more.
            if self.xdist:
                self.display.update(force=True)
            elif self.display.due(force=self.state.done >= self.state.total):
                self.waiting(force=True)

    pytest_runtest_logstart = _erase_first()
    pytest_internalerror = _erase_first()
    pytest_keyboard_interrupt = _erase_first()
    pytest_testnodedown = _erase_first(optional=True)
    pytest_sessionfinish = _erase_first()
    pytest_terminal_summary = _erase_first()

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self) -> None:
        self._clear()  # a historic hook: no wrapper allowed, clearing first is enough


def show_startup_step(config: pytest.Config, step: str) -> None:
    """Show ``step`` on the live progress line while the run starts (nothing without one)."""
    live = config.pluginmanager.get_plugin("osmosis-progress")
    if isinstance(live, LiveProgress):
        live._uncaptured(lambda: live.display.status(f"osmosis: {step}"))


def start_live_progress(
    config: pytest.Config, mode: str, interval: float, running: Callable[[], int]
) -> LiveProgress | None:
    """Register the display when ``mode`` shows something here; ``running`` counts rollouts."""
    if mode == "off" or config.option.collectonly:
        return None
    if not config.pluginmanager.has_plugin("terminalreporter"):
        return None  # -p no:terminal: there is no terminal output to keep in step with
    bar = mode == "bar"
    if mode == "auto":
        isatty = getattr(config.get_terminal_writer()._file, "isatty", None)
        bar = bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"
    live = LiveProgress(config, "bar" if bar else "line", interval=interval, running=running)
    config.pluginmanager.register(live, "osmosis-progress")
    return live
