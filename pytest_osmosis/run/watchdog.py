"""Notice when synchronous code blocks the rollout loop, and say which rollout and which line.

Every rollout of a run shares one event loop: an ``async def run`` that calls a blocking
function stops all of them, and each would fail as a timeout that blames nobody.
:class:`LoopWatchdog` pings the loop from its own thread; when it has not answered for
:data:`BLOCKED_AFTER_SEC`, it reads the loop thread's stack once and records the running task
(named after its row) and the line as a :class:`LoopBlock`.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace

from osmosis_rollout._internal.user_frames import is_user_file

BLOCKED_AFTER_SEC = 1.0
"""How long the loop may not answer before it counts as blocked."""

_PING_SEC = 0.25


@dataclass(frozen=True)
class LoopBlock:
    """One stretch of time during which the loop did not answer (``time.monotonic()``)."""

    task: str | None
    """The name of the task that was running (the scheduler names tasks after their row)."""
    where: str
    """The innermost line of user code on the loop thread's stack, ``file:line in fn: code``."""
    started: float
    ended: float

    @property
    def seconds(self) -> float:
        """How long the loop was blocked (at least)."""
        return self.ended - self.started

    def describe(self) -> str:
        """One line for a row's failure text."""
        who = f" by {self.task}" if self.task else ""
        return f"the rollout event loop was blocked for {self.seconds:.1f}s{who} at {self.where}"


def _innermost_user_line(thread: threading.Thread) -> str:
    """The innermost line of user code on ``thread``'s stack (else its innermost line)."""
    frame = sys._current_frames().get(thread.ident or 0)
    if frame is None:
        return "an unknown line (the loop thread had no frame)"
    stack = traceback.extract_stack(frame)
    chosen = next((f for f in reversed(stack) if is_user_file(f.filename)), stack[-1])
    code = f": {chosen.line}" if chosen.line else ""
    return f"{chosen.filename}:{chosen.lineno} in {chosen.name}{code}"


class LoopWatchdog:
    """Watches ``loop`` (running on ``loop_thread``) from a daemon thread of its own;
    ``on_block`` is told of a block while it lasts (every :data:`_PING_SEC`, ``ended``: now)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        loop_thread: threading.Thread,
        *,
        blocked_after: float = BLOCKED_AFTER_SEC,
        on_block: Callable[[LoopBlock], None] | None = None,
    ) -> None:
        self._loop = loop
        self._loop_thread = loop_thread
        self._blocked_after = blocked_after
        self._on_block = on_block
        self._answered = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._blocks: list[LoopBlock] = []
        self._ongoing: LoopBlock | None = None
        """The block in progress, so a rollout that fails the instant the loop answers again
        is told about it without waiting for this thread."""
        self._thread = threading.Thread(target=self._watch, name="osmosis-watchdog", daemon=True)

    def start(self) -> None:
        """Start watching."""
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (bounded)."""
        self._stop.set()
        self._thread.join(5)

    def ongoing(self) -> LoopBlock | None:
        """The block in progress, if the loop is blocked right now (``ended``: now)."""
        block = self._ongoing
        return None if block is None else replace(block, ended=time.monotonic())

    def blocks_between(self, start: float, end: float) -> list[LoopBlock]:
        """The blocks that overlap ``[start, end]`` (``time.monotonic()`` values)."""
        with self._lock:
            blocks = list(self._blocks)
            if self._ongoing is not None:
                blocks.append(replace(self._ongoing, ended=time.monotonic()))
        return [b for b in blocks if b.started <= end and b.ended >= start]

    def _watch(self) -> None:
        while not self._stop.is_set():
            sent = time.monotonic()
            self._answered.clear()
            try:
                self._loop.call_soon_threadsafe(self._answered.set)
            except RuntimeError:
                return  # the loop is closed
            if self._answered.wait(self._blocked_after) or not self._loop.is_running():
                # Answered, or the loop is not running (not yet, or no more): no block.
                self._stop.wait(_PING_SEC)
                continue
            if self._stop.is_set() or not self._loop_thread.is_alive():
                return
            task = asyncio.current_task(self._loop)
            name = task.get_name() if task is not None else None
            # Seen at once (``ended`` is read as now); the line once the stack has been read.
            self._ongoing = LoopBlock(name, "a line not read yet", sent, sent)
            block = LoopBlock(name, _innermost_user_line(self._loop_thread), sent, sent)
            self._ongoing = block
            while not self._answered.wait(_PING_SEC):
                if self._stop.is_set() or not self._loop_thread.is_alive():
                    break
                if self._on_block is not None:
                    self._on_block(replace(block, ended=time.monotonic()))
            with self._lock:
                self._ongoing = None
                self._blocks.append(replace(block, ended=time.monotonic()))
