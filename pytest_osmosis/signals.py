"""What SIGINT, SIGTERM and SIGHUP mean for a run: the one module that installs their handlers.

SIGHUP (a closed terminal, a cancelled CI job) is handled as SIGTERM is. While the rows run,
any of them stops the run as Ctrl-C stops pytest: the handler raises ``KeyboardInterrupt`` on
the main thread (rollouts run on the scheduler's thread, so it never lands in a rollout's
code; closing the scheduler cancels them), pytest writes its reports and exits 2, and the
run's files name the signal (``stopped_by``). Once the rows are over, a signal is remembered,
not raised, so the reports are written whole; :meth:`SignalWatch.exit_status` makes the exit
status 2. A signal ignored when the run began stays ignored; the previous handlers are put
back when the run is done.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from types import FrameType
from typing import Any

import pytest

__all__ = ["HANDLED", "SignalWatch"]

HANDLED = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s)
"""The signals a run handles (SIGHUP where the platform has it)."""


class SignalWatch:
    """The run's SIGINT/SIGTERM/SIGHUP handlers (main thread only; elsewhere every method is
    a no-op), and the name of the first signal received."""

    def __init__(self) -> None:
        self.received: str | None = None
        """``"SIGINT"``, ``"SIGTERM"`` or ``"SIGHUP"``: the first signal the run received."""
        self._previous: dict[int, Any] = {}
        self._rows_over = False

    def install(self) -> None:
        """Install the handlers (again after :meth:`rows_over`: the rows run once more)."""
        self._rows_over = False
        if self._previous or threading.current_thread() is not threading.main_thread():
            return
        for signum in HANDLED:
            if signal.getsignal(signum) is signal.SIG_IGN:
                continue  # e.g. started under nohup: the user asked for this one to be ignored
            with contextlib.suppress(ValueError, OSError):
                self._previous[signum] = signal.signal(signum, self._handle)

    def rows_over(self) -> None:
        """No row runs any more: a signal from now on is remembered, not raised."""
        self._rows_over = True

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signal.Signals(signum).name
        if not self._rows_over:
            raise KeyboardInterrupt

    def exit_status(self, exitstatus: int) -> int:
        """The run's exit status: 2 (interrupted) once a signal was received."""
        return exitstatus if self.received is None else int(pytest.ExitCode.INTERRUPTED)

    def restore(self) -> None:
        """Put the previous handlers back."""
        for signum, handler in self._previous.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signum, handler)
        self._previous.clear()
