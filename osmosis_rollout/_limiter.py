"""A concurrency limiter that counts its waiters and holders, for ``health()``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


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

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[None]:
        """Hold one slot for the duration of the block."""
        semaphore = self._semaphore_for_running_loop()
        if semaphore is not None:
            self.queued += 1
            try:
                await semaphore.acquire()
            finally:
                self.queued -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            if semaphore is not None:
                semaphore.release()

    def snapshot(self) -> dict[str, int | None]:
        """``{"max_concurrent", "queued", "running"}`` as ``health()`` reports them."""
        return {
            "max_concurrent": self.max_concurrent,
            "queued": self.queued,
            "running": self.running,
        }
