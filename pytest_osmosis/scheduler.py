"""Run many rollouts concurrently on one event loop while pytest reports items in order.

pytest executes items one after another on the main thread. The scheduler owns a private
event loop on a daemon thread; the plugin submits the selected items' rollouts ahead of
pytest's reporting (in item order, a window at a time) and each item then waits for its own
future. A semaphore bounds how many run at once, and since asyncio's semaphore is FIFO,
rollouts start in item order, so the item pytest waits on is always among the first to
finish.

The loop is private, so it works whatever pytest-asyncio (or the user's tests) do with
theirs, and ``-x`` / ``--maxfail`` simply cancel what is still pending.

Submissions made inside :meth:`RolloutScheduler.batch` reach the loop together, in one
hand-off: each hand-off wakes the loop's thread (a write to its self-pipe, a wake-up, a
turn at the GIL), which cost as much as a small rollout when every row was handed over
on its own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from pytest_osmosis.watchdog import LoopBlock, LoopWatchdog

T = TypeVar("T")

_STOP_TIMEOUT_SEC = 10.0

_Start = tuple[str, Callable[[], Awaitable[Any]], bool, "concurrent.futures.Future[Any]"]
"""One submission waiting for the loop: key, factory, bounded, the caller's future."""


class RolloutLoopStopped(RuntimeError):
    """The scheduler's event loop died; every rollout still pending on it fails with this."""

    def __init__(self, cause: BaseException) -> None:
        detail = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        super().__init__(
            f"the rollout event loop stopped: {detail} (raised on the loop outside any "
            "rollout, e.g. by a callback or task that user code scheduled); every rollout "
            "still pending on it failed"
        )
        self.cause = cause


class RolloutScheduler:
    """A bounded pool of coroutines on a background event loop, keyed for idempotent submits."""

    def __init__(self, concurrency: int) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.concurrency = concurrency
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run_loop, name="osmosis-rollouts", daemon=True)
        self._futures: dict[str, concurrent.futures.Future[Any]] = {}
        self._runs: set[concurrent.futures.Future[Any]] = set()
        self._submitted: dict[str, float] = {}
        self._lock = threading.Lock()
        self._semaphore: asyncio.Semaphore | None = None
        self._ready = threading.Event()
        self._stopped: RolloutLoopStopped | None = None
        self._batches = threading.local()
        self.running = 0
        """How many rollouts hold a slot right now (changed on the loop's thread only)."""
        self._thread.start()
        self._ready.wait()
        self._watchdog = LoopWatchdog(self._loop, self._thread)
        self._watchdog.start()

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._semaphore = asyncio.Semaphore(self.concurrency)
        self._loop.call_soon(self._ready.set)
        try:
            self._loop.run_forever()
        except BaseException as exc:
            # A SystemExit/KeyboardInterrupt raised outside any rollout's task (which
            # execute_in_process would have caught) ends run_forever: fail what waits on
            # the loop now instead of letting every item wait out its deadline.
            self._fail_pending(RolloutLoopStopped(exc))

    def _fail_pending(self, error: RolloutLoopStopped) -> None:
        with self._lock:
            self._stopped = error
            pending = [f for f in [*self._futures.values(), *self._runs] if not f.done()]
        for future in pending:
            try:
                future.set_exception(error)
            except concurrent.futures.InvalidStateError:
                pass  # finished or cancelled meanwhile

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The scheduler's event loop (runs on its own thread)."""
        return self._loop

    def submit(
        self, key: str, factory: Callable[[], Awaitable[T]], *, bounded: bool = True
    ) -> concurrent.futures.Future[T]:
        """Start ``factory()`` under the concurrency bound, once per ``key``; return its future.

        Cancelling the future cancels the rollout (before it starts, it never starts).
        Inside :meth:`batch`, the rollout starts when the batch ends.
        """
        batch: list[_Start] | None = getattr(self._batches, "pending", None)
        with self._lock:
            existing = self._futures.get(key)
            if existing is not None:
                return existing
            future: concurrent.futures.Future[T] = concurrent.futures.Future()
            start: _Start | None = None
            if self._stopped is not None:
                future.set_exception(self._stopped)
            else:
                start = (key, factory, bounded, future)
            self._futures[key] = future
            self._submitted[key] = time.monotonic()
        if start is not None:
            if batch is not None:
                batch.append(start)
            else:
                self._hand_over([start])
        return future

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Hand every :meth:`submit` made inside this block (on this thread) to the loop at once."""
        if getattr(self._batches, "pending", None) is not None:
            yield  # nested: the outer batch hands them over
            return
        pending: list[_Start] = []
        self._batches.pending = pending
        try:
            yield
        finally:
            self._batches.pending = None
            if pending:
                self._hand_over(pending)

    def _hand_over(self, starts: list[_Start]) -> None:
        try:
            self._loop.call_soon_threadsafe(self._start, starts)
        except RuntimeError as exc:
            # The loop was closed meanwhile: nothing will run these; their items say so.
            for *_, future in starts:
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    future.set_exception(exc)

    def _start(self, starts: list[_Start]) -> None:
        """On the loop: start each submission as a task tied to its caller's future."""
        for key, factory, bounded, future in starts:
            if future.done():
                continue  # cancelled (or failed by a dead loop) before it could start
            task = self._loop.create_task(self._guarded(key, factory, bounded))
            task.add_done_callback(functools.partial(_settle, future))
            future.add_done_callback(functools.partial(self._cancel_task, task))

    def _cancel_task(self, task: asyncio.Task[Any], future: concurrent.futures.Future[Any]) -> None:
        """The caller cancelled ``future``: cancel its task on the loop's thread."""
        if future.cancelled() and not task.done() and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(task.cancel)

    def run(self, factory: Callable[[], Awaitable[T]], timeout: float | None = None) -> T:
        """Run one coroutine on the loop, unbounded, and wait for it (for fixtures)."""

        async def _call() -> T:
            return await factory()

        with self._lock:
            if self._stopped is not None:
                raise self._stopped
            future = asyncio.run_coroutine_threadsafe(_call(), self._loop)
            self._runs.add(future)
        try:
            return future.result(timeout)
        finally:
            with self._lock:
                self._runs.discard(future)

    async def _guarded(self, key: str, factory: Callable[[], Awaitable[T]], bounded: bool) -> T:
        task = asyncio.current_task()
        if task is not None:
            # The watchdog names a blocked loop's running task: make that the row.
            task.set_name(key)
        if not bounded:
            return await factory()
        assert self._semaphore is not None
        async with self._semaphore:
            self.running += 1
            try:
                return await factory()
            finally:
                self.running -= 1

    def future(self, key: str) -> concurrent.futures.Future[Any] | None:
        """The future submitted under ``key``, if any."""
        with self._lock:
            return self._futures.get(key)

    def pending(self) -> int:
        """How many submitted rollouts have not been consumed yet (running, queued or done)."""
        with self._lock:
            return len(self._futures)

    def submitted_at(self, key: str) -> float:
        """When ``key`` was submitted (``time.monotonic()``)."""
        with self._lock:
            return self._submitted.get(key, time.monotonic())

    def blocks_between(self, start: float, end: float) -> list[LoopBlock]:
        """Times the loop was blocked that overlap ``[start, end]`` (``time.monotonic()``)."""
        return self._watchdog.blocks_between(start, end)

    def forget(self, key: str) -> None:
        """Drop the future of ``key`` once its result was consumed (bounds memory)."""
        with self._lock:
            self._futures.pop(key, None)
            self._submitted.pop(key, None)

    def cancel_pending(self) -> int:
        """Cancel every rollout that has not finished; return how many were cancelled."""
        with self._lock:
            pending = [f for f in self._futures.values() if not f.done()]
        for future in pending:
            future.cancel()
        return len(pending)

    def close(self) -> None:
        """Cancel what is left, stop the loop and join its thread (bounded)."""
        self._watchdog.stop()
        self.cancel_pending()
        if not self._loop.is_running():
            self._thread.join(_STOP_TIMEOUT_SEC)
            if not self._thread.is_alive() and not self._loop.is_closed():
                self._loop.close()
            return

        async def _drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=_STOP_TIMEOUT_SEC / 2)
            await self._loop.shutdown_asyncgens()

        try:
            asyncio.run_coroutine_threadsafe(_drain(), self._loop).result(_STOP_TIMEOUT_SEC)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError, RuntimeError):
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_STOP_TIMEOUT_SEC)
        if not self._thread.is_alive():
            self._loop.close()


def _settle(future: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    """Copy a finished task's outcome to its caller's future (unless that is already settled)."""
    # The caller may cancel, or a dead loop fail, the future from another thread at any time.
    with contextlib.suppress(RuntimeError, concurrent.futures.InvalidStateError):
        if future.done():
            return
        if task.cancelled():
            future.cancel()
            return
        if not future.set_running_or_notify_cancel():
            return  # cancelled by the caller: it asked for no result
        exc = task.exception()
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(task.result())
