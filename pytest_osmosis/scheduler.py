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

Who runs the loop: the thread that waits for a rollout (pytest's, in
:meth:`RolloutScheduler.wait`) runs it itself until its future is done, and the loop's own
thread runs it whenever nobody waits, after :data:`HANDBACK_SEC`. Rows are reported one after
another, so pytest's thread drives nearly all of a run: no thread switch per row and no
contest for the GIL between a thread reporting rows and a thread running them, which cost
more than the rows' own work when rollouts are cheap. Rollouts submitted ahead still make
progress while pytest does anything else (collects, runs other tests, writes reports).

While pytest's thread drives, what a rollout does still stays the rollout's: SIGINT and
SIGTERM (routed through the scheduler from its first wait to :meth:`RolloutScheduler.close`)
are held until the loop stops (at once: the handler stops it) and then handed to the handler
they were meant for, outside any rollout; an exception that escapes the loop itself
fails every pending rollout with :class:`RolloutLoopStopped` as it does on the loop's
thread; and code that blocks the loop past :attr:`RolloutScheduler.block_limit` is
interrupted with :class:`LoopBlockedTooLong`, which fails its rollout, instead of holding
the run forever.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

from pytest_osmosis.watchdog import LoopBlock, LoopWatchdog

T = TypeVar("T")

logger = logging.getLogger(__name__)

_STOP_TIMEOUT_SEC = 10.0

HANDBACK_SEC = 0.02
"""How long the loop waits, once the thread that drove it stopped waiting, before its own
thread runs it again: longer than pytest takes between two items."""

_PASS_EVERY_SEC = 0.002
"""While pytest reports rows that finished ahead, how often it gives the loop one pass."""

_HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_ROUTE_CHECK_SEC = 0.05
"""How often a wait checks that the signals still go through the scheduler (reading a
handler costs more than a row's wait; pytest and the session install theirs before rows run,
and one installed later is routed within this)."""


class LoopBlockedTooLong(BaseException):
    """Raised into code that blocked the rollout loop for longer than the scheduler's
    ``block_limit`` while the waiting thread ran the loop (a ``BaseException``, so a bare
    ``except Exception`` in user code does not keep blocking)."""


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
        """How many rollouts hold a slot right now (changed only by the thread running the loop)."""
        self.block_limit: float | None = None
        """Code that blocks the loop longer than this (seconds) while a waiting thread runs
        it is interrupted with :class:`LoopBlockedTooLong`; None: never."""
        # Who runs the loop (see the module's docstring), all under _drive.
        self._drive = threading.Condition()
        self._driver: int | None = None
        """The id of the thread running the loop now."""
        self._claimer: int | None = None
        """The id of the waiting thread that runs the loop, or is about to."""
        self._released = 0.0
        """When the last waiting thread stopped running the loop (``time.monotonic()``)."""
        self._closing = False
        self._held: tuple[int, Any] | None = None
        self._kicked_at = 0.0
        self._in_loop = False
        """A waiting thread runs the loop right now."""
        self._main_waiting = False
        """The main thread is inside :meth:`wait` (a signal is held until it ends)."""
        self._hold_handler = self._hold
        """The one bound method installed as the handler (so it can be recognized)."""
        self._routed_at = -_ROUTE_CHECK_SEC
        self._replaced: dict[int, Any] = {}
        """The handlers :meth:`_route_signals` replaced, by signal."""
        self._driven_at = 0.0
        """When a waiting thread last stopped running the loop (``time.monotonic()``)."""
        self._thread.start()
        self._ready.wait()
        self._watchdog = LoopWatchdog(
            self._loop, self._thread, driver=self._driving_thread, on_block=self._on_block
        )
        self._watchdog.start()

    def _run_loop(self) -> None:
        """The loop's own thread: run the loop whenever no waiting thread does."""
        asyncio.set_event_loop(self._loop)
        self._semaphore = asyncio.Semaphore(self.concurrency)
        self._ready.set()
        while self._take_back():
            self._run_forever()

    def _take_back(self) -> bool:
        """Wait until the loop is nobody's for :data:`HANDBACK_SEC`, then make it this
        thread's; False once the scheduler closes or the loop stopped."""
        with self._drive:
            while not (self._closing or self._stopped):
                if self._claimer is not None:
                    # Polled: a waiting thread that lets go does not wake this thread.
                    self._drive.wait(HANDBACK_SEC)
                    continue
                idle = time.monotonic() - self._released
                if idle >= HANDBACK_SEC:
                    self._driver = threading.get_ident()
                    return True
                self._drive.wait(HANDBACK_SEC - idle)
            return False

    def _run_forever(self) -> None:
        """Run the loop on this thread until it is stopped (by a waiting thread that wants
        it, by :meth:`close`, or by an exception that escapes it)."""
        try:
            self._loop.run_forever()
        except BaseException as exc:
            # A SystemExit/KeyboardInterrupt raised outside any rollout's task (which
            # execute_in_process would have caught) ends run_forever: fail what waits on
            # the loop now instead of letting every item wait out its deadline.
            self._fail_pending(RolloutLoopStopped(exc))
        finally:
            with self._drive:
                self._driver = None
                self._drive.notify_all()

    def _driving_thread(self) -> int | None:
        return self._driver

    def wait(self, future: concurrent.futures.Future[T], timeout: float | None) -> T:
        """``future.result(timeout)``, running the loop on this thread meanwhile when it can
        (not on the loop's own thread, nor in a thread that runs an event loop of its own).

        A wait for a future that is already done still takes the loop from its own thread:
        while pytest reports rows that finished ahead, nothing runs beside it.
        """
        if not self._may_drive():
            return future.result(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        main = threading.current_thread() is threading.main_thread()
        while True:
            claimed = False
            try:
                if main:
                    # From here to _deliver_held a signal is held, never raised: not inside a
                    # rollout, nor between taking a lock and the block that releases it.
                    self._main_waiting = True
                    self._route_signals()
                claimed = self._claim(deadline)
                if claimed and not future.done():
                    self._drive_until(future, deadline)
                elif claimed and time.monotonic() - self._driven_at >= _PASS_EVERY_SEC:
                    # Rows that finished ahead are being reported, and nobody else runs the
                    # loop meanwhile: a pass now and then keeps the others' I/O and timers
                    # moving (at most a millisecond or two late, as while pytest reports a row).
                    self._loop.call_soon(self._loop.stop)
                    self._run_here()
            finally:
                self._let_go()
                if main:
                    self._main_waiting = False
                    self._deliver_held()  # a held signal's handler may raise here
            if not claimed:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                return future.result(left)
            if future.done() or (deadline is not None and time.monotonic() >= deadline):
                return future.result(0)

    def _let_go(self) -> None:
        """This thread stops running the loop (if it had claimed it); the loop's own thread
        takes it back if nobody waits again within :data:`HANDBACK_SEC`."""
        me = threading.get_ident()
        with self._drive:
            if self._claimer != me:
                return
            if self._driver == me:
                self._driver = None
            self._claimer = None
            self._released = time.monotonic()

    def _may_drive(self) -> bool:
        return (
            threading.get_ident() != self._thread.ident
            and asyncio._get_running_loop() is None
            and not self._loop.is_closed()
        )

    def _claim(self, deadline: float | None) -> bool:
        """Make the loop this thread's: stop its own thread running it (bounded by
        ``deadline``: a loop blocked by user code cannot be stopped). False if it could not.

        Called inside ``try``/:meth:`_let_go`, which undoes a claim an exception cut short.
        """
        me = threading.get_ident()
        with self._drive:
            if self._stopped is not None or self._closing or self._claimer is not None:
                return False
            self._claimer = me
            if self._driver is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
            while self._driver is not None:
                # Polled: a signal held meanwhile (the loop's thread may be blocked by user
                # code) gives up the claim, so the signal reaches its handler at once.
                left = HANDBACK_SEC if deadline is None else deadline - time.monotonic()
                if self._held is not None or left <= 0:
                    self._claimer = None
                    self._released = time.monotonic()
                    return False
                self._drive.wait(min(left, HANDBACK_SEC))
            if self._stopped is not None:
                self._claimer = None
                return False
            self._driver = me
            return True

    def _drive_until(self, future: concurrent.futures.Future[Any], deadline: float | None) -> None:
        """Run the loop on this thread until ``future`` is done or ``deadline`` passes."""
        loop = self._loop
        me = threading.get_ident()
        running = [True]

        def _done(_: concurrent.futures.Future[Any]) -> None:
            if not running[0]:
                return  # finished after this wait gave up: stop nobody
            if threading.get_ident() == me:
                loop.stop()
            else:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(loop.stop)

        future.add_done_callback(_done)
        try:
            while not future.done() and self._held is None:
                timer = None
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    timer = loop.call_later(left, loop.stop)
                try:
                    if not self._run_here():
                        return
                finally:
                    if timer is not None:
                        timer.cancel()
        finally:
            running[0] = False

    def _run_here(self) -> bool:
        """Run the loop on this (waiting) thread until it stops; False if it died."""
        self._in_loop = True
        try:
            self._loop.run_forever()
        except LoopBlockedTooLong as exc:
            # Raised between tasks: nothing of a rollout's is left to fail.
            logger.warning("%s", exc)
        except BaseException as exc:
            self._fail_pending(RolloutLoopStopped(exc))
            return False
        finally:
            self._in_loop = False
            self._driven_at = time.monotonic()
        return True

    # -- signals while a waiting thread runs the loop ----------------------------------------

    def _route_signals(self) -> None:
        """On the main thread, route SIGINT/SIGTERM through :meth:`_hold` (when a Python
        handler has them). Installed once and kept between waits, as the swap itself cost more
        than a row: outside a wait :meth:`_hold` calls the handler it replaced at once."""
        if threading.current_thread() is not threading.main_thread():
            return
        now = time.monotonic()
        if now - self._routed_at < _ROUTE_CHECK_SEC:
            return
        self._routed_at = now
        hold = self._hold_handler
        for signum in _HELD_SIGNALS:
            current = signal.getsignal(signum)
            if current is hold or not callable(current):
                continue  # routed already; or the default action, or ignored: left alone
            try:
                signal.signal(signum, hold)
            except (ValueError, OSError):
                continue
            self._replaced[signum] = current

    def _hold(self, signum: int, frame: Any) -> None:
        if self._kicked_at and signum == signal.SIGINT:
            # The watchdog's: raised into the code that blocks the loop (if the loop is still
            # being run here: a block that ended meanwhile needs nothing).
            self._kicked_at = 0.0
            if not self._in_loop:
                return
            if self._held is not None:
                name = signal.Signals(self._held[0]).name
                raise LoopBlockedTooLong(
                    f"the rollout event loop was blocked when {name} arrived: interrupted "
                    "the code that blocked it, so that the run can stop"
                )
            raise LoopBlockedTooLong(
                f"the rollout event loop was blocked for more than {self.block_limit:g}s: "
                "interrupted the code that blocked it"
            )
        if not self._main_waiting:
            # Not in a wait: as if not routed. One held in the wait that just ended (whose
            # hand-over this signal may have cut short) goes first, or it would stay held and
            # end the next wait instead.
            self._deliver_held()
            self._replaced[signum](signum, frame)
            return
        if self._held is None:
            self._held = (signum, frame)
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._loop.stop)

    def _deliver_held(self) -> None:
        """Hand a signal held while the loop ran to the handler it was meant for."""
        got, self._held = self._held, None
        if got is not None:
            signum, frame = got
            self._replaced[signum](signum, frame)

    def _unroute_signals(self) -> None:
        """Put back the handlers :meth:`_route_signals` replaced, where it is still routing."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum, previous in self._replaced.items():
            if signal.getsignal(signum) is self._hold_handler:
                with contextlib.suppress(ValueError, OSError, TypeError):
                    signal.signal(signum, previous)

    def _on_block(self, seconds: float) -> None:
        """From the watchdog while the loop is blocked: past ``block_limit``, or once a signal
        waits for the loop to stop, while the main thread runs the loop, interrupt the code
        blocking it (once a second at most)."""
        limit = self.block_limit
        main = threading.main_thread().ident
        now = time.monotonic()
        with self._drive:
            if main is None or self._driver != main or not self._in_loop:
                return
            if self._held is None and (limit is None or seconds < limit):
                return
            if signal.getsignal(signal.SIGINT) is not self._hold_handler:
                return  # SIGINT would reach its own handler (or nobody): no way to interrupt
            if self._kicked_at and now - self._kicked_at < 1.0:
                return
            self._kicked_at = now
            signal.pthread_kill(main, signal.SIGINT)

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
            return self.wait(future, timeout)
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

        async def _drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=_STOP_TIMEOUT_SEC / 2)
            await self._loop.shutdown_asyncgens()

        if self._stopped is None and not self._loop.is_closed():
            try:
                self.run(_drain, timeout=_STOP_TIMEOUT_SEC)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError,
                    RuntimeError):  # fmt: skip
                pass
        with self._drive:
            self._closing = True
            self._drive.notify_all()
            if self._driver is not None:
                with contextlib.suppress(RuntimeError):
                    self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_STOP_TIMEOUT_SEC)
        self._unroute_signals()
        if not self._thread.is_alive() and not self._loop.is_running():
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
