"""A concurrency limiter that counts its waiters and holders, for ``health()``."""

from __future__ import annotations

import asyncio
from types import TracebackType


class ConcurrencyLimiter:
    """A semaphore (or nothing, when unbounded) with ``queued`` and ``running`` counters.

    Counters are restored on exceptions and cancellation, so ``health()`` never drifts.
    """

    def __init__(self, *, max_concurrent: int | None) -> None:
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1 or None, got {max_concurrent}")
        self.max_concurrent = max_concurrent
        self.queued = 0
        self.running = 0
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _semaphore_for_running_loop(self) -> asyncio.Semaphore | None:
        """The semaphore, rebuilt when an idle limiter is first used on a new event loop.

        An asyncio semaphore binds to the first loop it waits on; a backend kept by a
        fixture or reused across ``asyncio.run`` calls would otherwise fail on its next
        loop with "bound to a different event loop".
        """
        if self.max_concurrent is None:
            return None
        loop = asyncio.get_running_loop()
        if self._semaphore is None or (
            self._loop is not loop and self.queued == 0 and self.running == 0
        ):
            self._semaphore = asyncio.Semaphore(self.max_concurrent)
            self._loop = loop
        return self._semaphore

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


class _Slot:
    """One ``async with limiter.acquire()`` block: waits for a slot, holds it, gives it back.

    A class rather than an ``asynccontextmanager`` generator: every rollout enters one.
    """

    __slots__ = ("_limiter", "_semaphore")

    def __init__(self, limiter: ConcurrencyLimiter) -> None:
        self._limiter = limiter
        self._semaphore: asyncio.Semaphore | None = None

    async def __aenter__(self) -> None:
        limiter = self._limiter
        semaphore = self._semaphore = limiter._semaphore_for_running_loop()
        if semaphore is not None:
            limiter.queued += 1
            try:
                await semaphore.acquire()
            finally:
                limiter.queued -= 1
        limiter.running += 1

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._limiter.running -= 1
        if self._semaphore is not None:
            self._semaphore.release()
