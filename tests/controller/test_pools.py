"""One client, many rollouts: polls are sharded over several httpx pools (issue 16, 2)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

import httpx

from osmosis_rollout import AgentWorkflow, AgentWorkflowContext, LocalBackend
from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.controller.pools import ROLLOUTS_PER_POOL, ShardedPools
from osmosis_rollout.server import create_rollout_server

Serve = Callable[[Any], contextlib.AbstractContextManager[str]]
IN_FLIGHT = 2 * ROLLOUTS_PER_POOL + 5


RELEASE = threading.Event()


class Held(AgentWorkflow[Any]):
    """Holds every rollout in flight until the test sets :data:`RELEASE` (bounded)."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        async with asyncio.timeout(60):
            while not RELEASE.is_set():
                await asyncio.sleep(0.01)
        return [{"role": "assistant", "content": "ok"}]


def test_a_full_pool_opens_another_and_released_places_are_reused() -> None:
    opened: list[httpx.AsyncClient] = []

    def factory() -> httpx.AsyncClient:
        opened.append(httpx.AsyncClient())
        return opened[-1]

    pools = ShardedPools(httpx.AsyncClient(), factory)
    slots = [pools.acquire() for _ in range(ROLLOUTS_PER_POOL + 1)]
    assert len(pools.clients) == 2
    assert pools.loads == [ROLLOUTS_PER_POOL, 1]
    slots[0].release()
    slots[0].release()  # idempotent
    assert pools.loads == [ROLLOUTS_PER_POOL - 1, 1]
    again = pools.acquire()
    assert again.client is pools.clients[1]  # the least-loaded pool
    assert len(opened) == 1


async def test_one_client_spreads_rollouts_in_flight_over_pools(serve: Serve) -> None:
    RELEASE.clear()
    app = create_rollout_server(
        backend=LocalBackend(workflow=Held, workflow_config=None),
        configure_logging=False,
        result_wait_timeout_sec=1.0,
    )
    with serve(app) as url:
        async with RolloutClient(url) as client:
            handles = [
                await client.run_rollout_async(
                    initial_messages=[{"role": "user", "content": "hi"}],
                    chat_completions_url="http://127.0.0.1:9/v1",
                    rollout_id=f"p-{i}",
                    grade=False,
                )
                for i in range(IN_FLIGHT)
            ]
            pools = client._pools
            assert pools is not None
            loads = list(pools.loads)
            RELEASE.set()
            results = await asyncio.gather(*handles)
            assert {r.status for r in results} == {"success"}
            await asyncio.sleep(0)  # done callbacks run after the awaiters resume
            assert loads == [
                ROLLOUTS_PER_POOL,
                ROLLOUTS_PER_POOL,
                IN_FLIGHT - 2 * ROLLOUTS_PER_POOL,
            ]
            assert pools.loads == [0, 0, 0]
            assert client.http_client is pools.clients[0]


async def test_a_given_http_client_is_never_sharded() -> None:
    async with httpx.AsyncClient() as http:
        client = RolloutClient("http://127.0.0.1:9", http_client=http)
        assert client._pools is None
        await client.aclose()
        assert not http.is_closed
