"""Connection pools of bounded size behind one HTTP client, for many calls in flight.

An httpx connection pool scans every one of its connections whenever a request starts or a
response closes (each idle one with a readability poll): with 256 calls in flight on one
pool that scan was over half of the policy's CPU per model call. :func:`pooled_transport`
splits a client's connections over pools of :data:`REQUESTS_PER_POOL`, opened as the calls
in flight need them. It is built for a given HTTP library (``httpx``, or ``httpx2``, which
the ``openai`` SDK uses from release 3), so the one transport serves every client that
makes many calls at once: the policy's ``AsyncOpenAI`` client
(:mod:`osmosis_rollout.policy.openai_compatible`), the integrations' endpoint client
(:mod:`osmosis_rollout.integrations._endpoint`) and ``RolloutChatClient``'s httpx client.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any

__all__ = [
    "KEEPALIVE_EXPIRY_SEC",
    "LOOP_CONNECTIONS",
    "REQUESTS_PER_POOL",
    "keepalive_transport",
    "openai_http",
    "pool_sizes",
    "pooled_transport",
]

REQUESTS_PER_POOL = 16
"""Connections per pool."""
LOOP_CONNECTIONS = 1024
"""Connections a rollout client holds per event loop at most, in pools opened as calls need
them (none idle at start)."""
KEEPALIVE_EXPIRY_SEC = 4.0
"""Below the 5 s keep-alive of uvicorn and most inference servers: a pool drops an idle
connection before the server closes it, so a call never goes out on one being closed."""


def pool_sizes(max_connections: int) -> list[int]:
    """Pools of :data:`REQUESTS_PER_POOL` connections (the last one smaller) holding
    ``max_connections`` in all."""
    full, rest = divmod(max_connections, REQUESTS_PER_POOL)
    return [REQUESTS_PER_POOL] * full + ([rest] if rest else [])


def pooled_transport(http: ModuleType, factory: Callable[[int], Any], sizes: list[int]) -> Any:
    """An async transport of ``http`` over pools made by ``factory(size)``, one per ``sizes``.

    A request goes to the first pool with a free connection (so the first pools' connections
    stay warm), opening the next pool only when every open one is busy; with all busy, the
    least loaded pool queues it. Its place is given back when its response closes, or when
    it fails.
    """
    return _transport_type(http)(factory, sizes)


def keepalive_transport(http: ModuleType, max_connections: int, tls: Any) -> Any:
    """:func:`pooled_transport` of ``http`` holding ``max_connections`` kept-alive connections
    (:data:`KEEPALIVE_EXPIRY_SEC`), verified with the TLS context ``tls``."""

    def pool(size: int) -> Any:
        limits = http.Limits(
            max_connections=size,
            max_keepalive_connections=size,
            keepalive_expiry=KEEPALIVE_EXPIRY_SEC,
        )
        return http.AsyncHTTPTransport(verify=tls, limits=limits)

    return pooled_transport(http, pool, pool_sizes(max_connections))


def openai_http(openai: ModuleType) -> ModuleType:
    """The HTTP library the installed ``openai`` SDK is built on (httpx, or httpx2 from openai 3)."""
    return importlib.import_module(
        type(openai.DEFAULT_CONNECTION_LIMITS).__module__.partition(".")[0]
    )


@functools.cache
def _transport_type(http: ModuleType) -> type[Any]:
    """The transport class for ``http`` (its base classes come from that module)."""

    class Releasing(http.AsyncByteStream):  # type: ignore[misc, name-defined]
        def __init__(self, stream: Any, release: Callable[[], None]) -> None:
            self._stream = stream
            self._release: Callable[[], None] | None = release

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for part in self._stream:
                yield part

        async def aclose(self) -> None:
            try:
                await self._stream.aclose()
            finally:
                release, self._release = self._release, None
                if release is not None:
                    release()

    class ShardedPools(http.AsyncBaseTransport):  # type: ignore[misc, name-defined]
        def __init__(self, factory: Callable[[int], Any], sizes: list[int]) -> None:
            self._factory, self._sizes = factory, sizes
            self.pools: list[Any] = []
            self.loads: list[int] = []

        def _acquire(self) -> int:
            for index, load in enumerate(self.loads):
                if load < self._sizes[index]:
                    break
            else:
                if len(self.pools) < len(self._sizes):
                    self.pools.append(self._factory(self._sizes[len(self.pools)]))
                    self.loads.append(0)
                    index = len(self.pools) - 1
                else:  # every connection busy: the least loaded pool queues the request
                    index = min(range(len(self.loads)), key=self.loads.__getitem__)
            self.loads[index] += 1
            return index

        def _release(self, index: int) -> None:
            self.loads[index] -= 1

        async def handle_async_request(self, request: Any) -> Any:
            index = self._acquire()
            try:
                response = await self.pools[index].handle_async_request(request)
            except BaseException:
                self._release(index)
                raise
            response.stream = Releasing(response.stream, lambda: self._release(index))
            return response

        async def aclose(self) -> None:
            for pool in self.pools:
                await pool.aclose()

    return ShardedPools
