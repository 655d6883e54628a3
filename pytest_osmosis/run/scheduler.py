"""Run many rollouts concurrently on one event loop while pytest reports items in order.

One daemon thread, ``osmosis-rollouts``, runs the scheduler's private event loop from its
start to :meth:`RolloutScheduler.close`; no other thread ever runs it. pytest's thread hands
it work through ``run_coroutine_threadsafe`` and waits on the futures in short slices, so a
signal stops pytest's thread, never the loop's (:mod:`pytest_osmosis.signals`). A FIFO
semaphore bounds how many rollouts run at once, so they start in item order. A loop blocked
past :attr:`RolloutScheduler.block_limit` is given up (:class:`RolloutLoopBlocked`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from pytest_osmosis.run.watchdog import LoopBlock, LoopWatchdog

T = TypeVar("T")

__all__ = ["RolloutLoopBlocked", "RolloutLoopStopped", "RolloutScheduler"]

STOP_TIMEOUT_SEC = 10.0
"""How long :meth:`RolloutScheduler.close` lets the loop's tasks and thread finish."""
WAIT_SLICE_SEC = 0.1
"""A wait's longest uninterrupted sleep on a future."""


class RolloutLoopStopped(RuntimeError):
    """The scheduler's event loop died; every rollout still pending on it fails with this."""


class RolloutLoopBlocked(RolloutLoopStopped):
    """Sync code blocked the loop for longer than an item may wait: the loop was given up."""


class RolloutScheduler:
    """A bounded pool of coroutines on a background event loop, keyed for idempotent submits."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.running = 0
        """How many rollouts hold a slot right now (changed only on the loop's thread)."""
        self.block_limit: float | None = None
        """A loop blocked longer than this (seconds) is given up; None: never."""
        self.stopped: RolloutLoopStopped | None = None
        """Why the loop was given up or died, if it was (nothing runs on it then)."""
        self.loop = asyncio.new_event_loop()
        self._semaphore = asyncio.BoundedSemaphore(concurrency)  # FIFO: rows start in order
        self._futures: dict[str, concurrent.futures.Future[Any]] = {}
        self._runs: set[concurrent.futures.Future[Any]] = set()
        self._submitted: dict[str, float] = {}
        self._handed: weakref.WeakSet[Coroutine[Any, Any, Any]] = weakref.WeakSet()
        """Coroutines handed to the loop (held weakly: a finished one drops out), for a loop
        that dies before starting them to close."""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run_loop, name="osmosis-rollouts", daemon=True)
        self._thread.start()
        self._watchdog = LoopWatchdog(self.loop, self._thread, on_block=self._on_block)
        self._watchdog.start()

    def on_loop(self) -> bool:
        """True on the loop's own thread."""
        return threading.get_ident() == self._thread.ident

    def _run_loop(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        except BaseException as exc:
            # A SystemExit/KeyboardInterrupt raised outside any rollout's task (which
            # execute_in_process would have caught) ends the loop: fail what waits on it now.
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            self._fail_pending(
                RolloutLoopStopped(
                    f"the rollout event loop stopped: {detail} (raised on the loop outside any "
                    "rollout, e.g. by a callback or task that user code scheduled); every "
                    "rollout still pending on it failed"
                )
            )
            self._close_unstarted()

    def _close_unstarted(self) -> None:
        """Close the coroutines the dead loop never started (queued, or a task not yet
        stepped): left to the garbage collector, each warns it was never awaited.

        Only on the loop's thread once the loop is dead: nothing runs them then, and
        :meth:`_hand_over` (under the lock) hands over nothing more once ``stopped`` is set.
        """
        with self._lock:
            unstarted = list(self._handed)
        for coroutine in unstarted:
            if inspect.getcoroutinestate(coroutine) == inspect.CORO_CREATED:
                coroutine.close()

    def _on_block(self, block: LoopBlock) -> None:
        """From the watchdog, while the loop is blocked: past ``block_limit``, give it up."""
        limit = self.block_limit
        if limit is not None and block.seconds >= limit and self.stopped is None:
            self._fail_pending(
                RolloutLoopBlocked(
                    f"{block.describe()}, longer than an item may wait ({limit:g}s): the run "
                    "gave up on the loop, and every rollout still pending on it failed "
                    "(blocking code in an async function: await an async equivalent, or use "
                    "asyncio.to_thread)"
                )
            )

    def _fail_pending(self, error: RolloutLoopStopped) -> None:
        with self._lock:
            self.stopped = error
            pending = [f for f in [*self._futures.values(), *self._runs] if not f.done()]
        for future in pending:
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                future.set_exception(error)

    def submit(self, key: str, factory: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        """Start ``factory()`` under the concurrency bound, once per ``key``; return its future
        (cancelling it cancels the rollout, or keeps it from starting)."""
        with self._lock:
            existing = self._futures.get(key)
            if existing is not None:
                return existing
            future = self._hand_over(key, factory)
            self._futures[key] = future
            self._submitted[key] = time.monotonic()
        return future

    def _hand_over(
        self, key: str | None, factory: Callable[[], Awaitable[T]]
    ) -> concurrent.futures.Future[T]:
        """The future of ``factory()`` on the loop; failed at once when the loop is gone
        (given up, dead or closed: nothing will run it, its item says so)."""
        error: BaseException | None = self.stopped
        if error is None:
            coroutine = self._guarded(key, factory)
            try:
                future = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
            except RuntimeError as exc:
                coroutine.close()  # never scheduled, so never to be awaited
                error = exc
            else:
                self._handed.add(coroutine)
                return future
        failed: concurrent.futures.Future[T] = concurrent.futures.Future()
        failed.set_exception(error)
        return failed

    async def _guarded(self, key: str | None, factory: Callable[[], Awaitable[T]]) -> T:
        """``factory()``; a keyed rollout under the bound, a :meth:`run` (no key) without."""
        if key is None:
            return await factory()
        task = asyncio.current_task()
        if task is not None:
            task.set_name(key)  # the watchdog names a blocked loop's running task: the row
        async with self._semaphore:
            self.running += 1
            try:
                return await factory()
            finally:
                self.running -= 1

    def wait(
        self,
        future: concurrent.futures.Future[T],
        timeout: float | None,
        *,
        idle: Callable[[], None] | None = None,
    ) -> T:
        """``future.result(timeout)``, slept in slices of :data:`WAIT_SLICE_SEC` (so a
        signal's handler runs on the waiting main thread within one, at the latest), with
        ``idle()`` called between them."""
        if self.on_loop():
            raise RuntimeError("a rollout cannot wait for another on the loop's own thread")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = WAIT_SLICE_SEC if deadline is None else deadline - time.monotonic()
            try:
                return future.result(max(0.0, min(left, WAIT_SLICE_SEC)))
            except concurrent.futures.TimeoutError:
                if left <= WAIT_SLICE_SEC and deadline is not None:
                    raise
                if idle is not None:
                    idle()

    def run(self, factory: Callable[[], Awaitable[T]], timeout: float | None = None) -> T:
        """Run one coroutine on the loop, unbounded, and wait for it (for fixtures)."""
        with self._lock:
            future = self._hand_over(None, factory)
            self._runs.add(future)
        try:
            return self.wait(future, timeout)
        finally:
            with self._lock:
                self._runs.discard(future)

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
        """Cancel what is left, stop the loop and join its thread (bounded; not a blocked loop)."""
        if self.loop.is_closed():
            return
        blocked = self._watchdog.ongoing() is not None
        given_up = blocked or isinstance(self.stopped, RolloutLoopBlocked)
        self._watchdog.stop()
        self.cancel_pending()
        if self.stopped is None and not given_up:
            with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
                self.run(self._drain, timeout=STOP_TIMEOUT_SEC)  # RolloutLoopStopped too
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(0 if given_up else STOP_TIMEOUT_SEC)
        if not self._thread.is_alive():
            self.loop.close()

    async def _drain(self) -> None:
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=STOP_TIMEOUT_SEC / 2)
        await self.loop.shutdown_asyncgens()
