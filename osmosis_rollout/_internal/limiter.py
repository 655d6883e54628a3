"""A concurrency limiter that counts its waiters and holders, for ``health()``.

Its limit can change while rollouts hold and wait for slots (the server's adaptive
concurrency sets it; see ``osmosis_rollout/server/concurrency.py``): a raised limit starts
waiters at once, a lowered one lets the holders finish and starts no one until the count
of holders is under it again.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from types import TracebackType


class ConcurrencyLimiter:
    """A first-come first-served slot counter (or nothing, when unbounded).

    ``queued`` and ``running`` are restored on exceptions and cancellation, so ``health()``
    never drifts. ``on_release``, when set, is called with the seconds each slot was held.
    """

    def __init__(self, *, max_concurrent: int | None) -> None:
        _check_limit(max_concurrent)
        self.max_concurrent = max_concurrent
        self.queued = 0
        self.running = 0
        self.on_release: Callable[[float], None] | None = None
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def set_limit(self, max_concurrent: int | None) -> None:
        """Change the limit; waiters start at once when it rose."""
        _check_limit(max_concurrent)
        self.max_concurrent = max_concurrent
        self._start_waiters()

    def _has_free_slot(self) -> bool:
        return self.max_concurrent is None or self.running < self.max_concurrent

    def _start_waiters(self) -> None:
        """Hand free slots to waiters in arrival order (the slot is counted for them now)."""
        while self._waiters and self._has_free_slot():
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.running += 1
                waiter.set_result(None)

    def acquire(self) -> _Slot:
        """Hold one slot for the duration of an ``async with`` block."""
        return _Slot(self)

    def snapshot(self) -> dict[str, int | None]:
        """``{"max_concurrent", "queued", "running"}`` as ``health()`` reports them."""
        return {
            "max_concurrent": self.max_concurrent,
            "queued": self.queued,
            "running": self.running,
        }


def _check_limit(max_concurrent: int | None) -> None:
    if max_concurrent is not None and max_concurrent < 1:
        raise ValueError(f"max_concurrent must be >= 1 or None, got {max_concurrent}")


class _Slot:
    """One ``async with limiter.acquire()`` block: waits for a slot, holds it, gives it back.

    A class rather than an ``asynccontextmanager`` generator: every rollout enters one.
    """

    __slots__ = ("_limiter", "_started")

    def __init__(self, limiter: ConcurrencyLimiter) -> None:
        self._limiter = limiter
        self._started = 0.0

    async def __aenter__(self) -> None:
        limiter = self._limiter
        if not limiter._waiters and limiter._has_free_slot():
            limiter.running += 1
        else:
            waiter = asyncio.get_running_loop().create_future()
            limiter._waiters.append(waiter)
            limiter.queued += 1
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    # Granted, then cancelled before it could start: pass the slot on.
                    limiter.running -= 1
                    limiter._start_waiters()
                else:
                    waiter.cancel()  # _start_waiters skips it
                raise
            finally:
                limiter.queued -= 1
        self._started = time.monotonic()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        limiter = self._limiter
        limiter.running -= 1
        limiter._start_waiters()
        if limiter.on_release is not None:
            limiter.on_release(time.monotonic() - self._started)
