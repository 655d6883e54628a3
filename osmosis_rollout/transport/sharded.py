"""An httpx transport that spreads requests over several connection pools.

httpcore's pool scans every pooled connection whenever a request starts or a response
closes (each idle one with a readability poll): with one pool, a rollout server with a
hundred model calls in flight pays on every call for all the others. :class:`ShardedTransport`
gives each pool at most ``per_pool`` requests in flight, sends each request to the least
loaded pool (the first one while the load is light, so its connections stay warm) and
opens another pool only when every pool is full. A request's place is given back when its
response is closed, or when it fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Final, cast

import httpx

__all__ = ["REQUESTS_PER_POOL", "ShardedTransport"]

REQUESTS_PER_POOL: Final = 16
"""Requests in flight per pool before the next pool takes them."""


class ShardedTransport(httpx.AsyncBaseTransport):
    """Requests over pools made by ``factory``, each with at most ``per_pool`` in flight."""

    def __init__(
        self,
        factory: Callable[[], httpx.AsyncBaseTransport],
        *,
        per_pool: int = REQUESTS_PER_POOL,
    ) -> None:
        self._factory = factory
        self._per_pool = per_pool
        self.pools: list[httpx.AsyncBaseTransport] = []
        self.loads: list[int] = []

    def _acquire(self) -> int:
        if self.loads:
            index = min(range(len(self.loads)), key=self.loads.__getitem__)
            if self.loads[index] < self._per_pool:
                self.loads[index] += 1
                return index
        self.pools.append(self._factory())
        self.loads.append(1)
        return len(self.pools) - 1

    def _release(self, index: int) -> None:
        self.loads[index] -= 1

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` on the least-loaded pool; its place is held until the body closes."""
        index = self._acquire()
        try:
            response = await self.pools[index].handle_async_request(request)
        except BaseException:
            self._release(index)
            raise
        response.stream = _Releasing(cast(httpx.AsyncByteStream, response.stream), self, index)
        return response

    async def aclose(self) -> None:
        """Close every pool."""
        for pool in self.pools:
            await pool.aclose()


class _Releasing(httpx.AsyncByteStream):
    """A response body that gives its request's place back once, when closed."""

    def __init__(self, stream: httpx.AsyncByteStream, owner: ShardedTransport, index: int) -> None:
        self._stream = stream
        self._owner: ShardedTransport | None = owner
        self._index = index

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for part in self._stream:
            yield part

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            owner, self._owner = self._owner, None
            if owner is not None:
                owner._release(self._index)
