"""What a rollout prints goes to ``rollouts.log``, redacted, never straight to the terminal.

Rows run on the scheduler's thread while pytest reports other items: a rollout's print would
reach the terminal past the redactor while capturing is suspended, or be filed under whichever
item is running while it is active. So routers stand in front of ``sys.stdout`` and
``sys.stderr`` (:func:`install_router`, before pytest's capturing starts) and of the streams
pytest's capturing swaps in (:func:`route_pytest_capture`). A write made inside a rollout
(:func:`rollout_output`, a context variable its tasks and threads inherit) goes, a line at a
time, to the ``osmosis_rollout.output`` logger; any other write goes to the stream wrapped.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

from osmosis_rollout.redaction import Redactor, redact_handler

logger = logging.getLogger("osmosis_rollout.output")

_CURRENT: contextvars.ContextVar[RolloutOutput | None] = contextvars.ContextVar(
    "osmosis_rollout_output", default=None
)

KEPT_CHARS = 2000
"""What a rollout's printed text keeps for its row (its failure's "Captured rollout output"
section, the report's ``printed``); ``rollouts.log`` has all of it."""


class RolloutOutput:
    """One rollout's printed text, logged a whole line at a time (and the first
    :data:`KEPT_CHARS` of it kept for its row)."""

    def __init__(self, rollout_id: str) -> None:
        self.rollout_id = rollout_id
        self._kept: list[str] = []
        self._kept_chars = 0
        self._left_out = 0
        self._partial = {"stdout": "", "stderr": ""}
        self.logging = False
        """True while a line is being logged: a handler that writes to ``sys.stderr`` then
        reaches the terminal stream instead of coming back here without end."""

    def write(self, stream: str, text: str) -> None:
        *lines, self._partial[stream] = (self._partial[stream] + text).split("\n")
        self._log(stream, lines)

    def flush(self) -> None:
        for stream, rest in self._partial.items():
            self._partial[stream] = ""
            self._log(stream, [rest] if rest else [])

    def text(self) -> str:
        """The lines kept, ``stderr:`` marking the standard error's, and how many were not."""
        tail = [f"... {self._left_out} more lines in rollouts.log"] if self._left_out else []
        return "\n".join([*self._kept, *tail])

    def _log(self, stream: str, lines: list[str]) -> None:
        self.logging = True
        try:
            for line in lines:
                shown = line if stream == "stdout" else f"stderr: {line}"
                if self._kept_chars + len(shown) > KEPT_CHARS:
                    self._left_out += 1
                else:
                    self._kept_chars += len(shown) + 1
                    self._kept.append(shown)
                logger.info("%s %s: %s", self.rollout_id, stream, line)
        finally:
            self.logging = False


class _Router:
    """Stands in for ``sys.stdout``/``sys.stderr``: a rollout's writes go to its log."""

    def __init__(self, inner: TextIO, stream: str) -> None:
        self._inner = inner
        self._stream = stream

    def write(self, text: str) -> int:
        output = _CURRENT.get()
        if output is None or output.logging:
            return self._inner.write(text)
        output.write(self._stream, text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if _CURRENT.get() is None:
            self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class RolloutsLogHandler(logging.FileHandler):
    """The handler writing ``rollouts.log``: the first record it cannot write (a full disk)
    stops it, and is remembered in :attr:`failure` for the run's summary (logging's own
    traceback to ``sys.stderr`` would be routed back to this very log, and fail again)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, encoding="utf-8")
        self.failure: str | None = None
        """Why the log stopped: ``No space left on device``; None while it writes."""

    def emit(self, record: logging.LogRecord) -> None:
        if self.failure is None:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        # Called by emit while it handles the error, so there is one.
        error = sys.exc_info()[1]
        self.failure = getattr(error, "strerror", None) or str(error) or type(error).__name__
        with contextlib.suppress(Exception):
            self.close()


def _put_back(owner: Any, name: str, router: _Router) -> None:
    """Put back the stream ``router`` wraps, if ``router`` is still the one in place."""
    if getattr(owner, name) is router:
        setattr(owner, name, router._inner)


def install_router() -> Callable[[], None]:
    """Put the router in front of ``sys.stdout`` and ``sys.stderr`` (unless one is there
    already: a nested pytest run); return the undo."""
    undo = contextlib.ExitStack()
    for name in ("stdout", "stderr"):
        current = getattr(sys, name)
        if current is not None and not isinstance(current, _Router):
            router = _Router(current, name)
            setattr(sys, name, router)
            undo.callback(_put_back, sys, name, router)
    return undo.close


@contextlib.contextmanager
def rollout_output(rollout_id: str) -> Iterator[RolloutOutput]:
    """Within this block (and the tasks it starts), printed text is the rollout's."""
    output = RolloutOutput(rollout_id)
    token = _CURRENT.set(output)
    try:
        yield output
    finally:
        # A rollout coroutine closed by the garbage collector after its loop stopped (a run
        # cut short) finishes in another context, where the token means nothing: its
        # context dies with it, so there is nothing to restore.
        with contextlib.suppress(ValueError):
            _CURRENT.reset(token)
        output.flush()


def route_pytest_capture(capman: Any) -> Callable[[], None]:
    """Wrap the streams pytest's global capturing swaps into ``sys`` in routers; return the undo.
    Only under fd capturing (pytest's default), whose ``syscapture.tmpfile`` pytest writes to and
    never reads back. ``--capture=sys`` reads its stream back and must keep it: there, prints
    land in the running item's captured output, redacted like the rest of its report.
    """
    capturing = getattr(capman, "_global_capturing", None)
    undo = contextlib.ExitStack()
    for attr, stream in (("out", "stdout"), ("err", "stderr")):
        holder: Any = getattr(getattr(capturing, attr, None), "syscapture", None)
        tmpfile = getattr(holder, "tmpfile", None)
        if tmpfile is None or isinstance(tmpfile, _Router) or not hasattr(tmpfile, "write"):
            continue
        router = _Router(tmpfile, stream)
        holder.tmpfile = router
        if getattr(sys, stream) is tmpfile:  # capturing is active right now
            setattr(sys, stream, router)
        undo.callback(_put_back, holder, "tmpfile", router)
        undo.callback(_put_back, sys, stream, router)  # set by pytest on a resume, too
    return undo.close


@contextlib.contextmanager
def rollouts_log(path: Path, redactor: Redactor, *, echo: bool) -> Iterator[RolloutsLogHandler]:
    """Send osmosis_rollout's logs to ``path`` (``rollouts.log``) within this block, redacted:
    rollouts run on another thread, so their records would otherwise land in whichever item
    pytest is reporting. With ``echo`` (``-s``), rollouts' printed lines reach the terminal
    too, redacted, each prefixed by its rollout id (``row-3.0.1a2b3c4d stdout: ...``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = RolloutsLogHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    redact_handler(handler, redactor)
    package = logging.getLogger("osmosis_rollout")
    propagate, level = package.propagate, package.level
    package.addHandler(handler)
    package.propagate = False
    if package.level == logging.NOTSET or package.level > logging.INFO:
        package.setLevel(logging.INFO)
    echoed: logging.Handler | None = None
    if echo:
        terminal = sys.stdout
        while isinstance(terminal, _Router):
            terminal = terminal._inner
        echoed = logging.StreamHandler(terminal)
        echoed.setFormatter(logging.Formatter("%(message)s"))
        redact_handler(echoed, redactor)
        logger.addHandler(echoed)
    try:
        yield handler
    finally:
        if echoed is not None:
            logger.removeHandler(echoed)
        package.removeHandler(handler)
        handler.close()
        package.propagate = propagate
        package.setLevel(level)
