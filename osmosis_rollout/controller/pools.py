"""Connection pools of a ``RolloutClient`` that owns its HTTP client, sharded by rollout.

httpcore's pool scans every pooled connection whenever a request starts or a response
closes, and every long poll in flight holds a connection: with one pool, the controller's
CPU per request grows with the number of rollouts in flight, so the cost of a run grows
with its square (one client at 128 in flight ran ~6x slower than eight clients sharing the
load; ``bench/bench_controller.py``). Giving each pool at most :data:`ROLLOUTS_PER_POOL`
rollouts keeps every scan short. A rollout's admission and all its polls use one pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

import httpx

__all__ = ["ROLLOUTS_PER_POOL", "PoolSlot", "ShardedPools"]

ROLLOUTS_PER_POOL: Final = 16
"""Rollouts in flight per httpx pool before another pool is opened."""


@dataclass
class PoolSlot:
    """One rollout's place in a pool; ``release()`` once its polling ended (idempotent)."""

    client: httpx.AsyncClient
    _pools: ShardedPools | None = field(default=None, repr=False)
    _index: int = field(default=0, repr=False)

    def release(self) -> None:
        """Give the place back."""
        pools, self._pools = self._pools, None
        if pools is not None:
            pools.loads[self._index] -= 1


class ShardedPools:
    """Opens httpx clients on demand, each serving at most :data:`ROLLOUTS_PER_POOL` rollouts."""

    def __init__(self, first: httpx.AsyncClient, factory: Callable[[], httpx.AsyncClient]) -> None:
        self.clients: list[httpx.AsyncClient] = [first]
        self.loads: list[int] = [0]
        self._factory = factory

    def acquire(self) -> PoolSlot:
        """A place in the least-loaded pool, opening a new pool when every one is full."""
        index = min(range(len(self.loads)), key=self.loads.__getitem__)
        if self.loads[index] >= ROLLOUTS_PER_POOL:
            self.clients.append(self._factory())
            self.loads.append(0)
            index = len(self.clients) - 1
        self.loads[index] += 1
        return PoolSlot(self.clients[index], self, index)

    async def aclose(self) -> None:
        """Close every pool."""
        for client in self.clients:
            await client.aclose()
