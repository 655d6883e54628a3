"""Real HTTP on loopback: uvicorn serving the server, our RolloutClient driving it."""

from __future__ import annotations

import asyncio
from typing import Any

from server_support import (
    FAST,
    EchoWorkflow,
    ExactGrader,
    Gate,
    GatedWorkflow,
    eventually,
    make_app,
    uvicorn_thread,
)

from osmosis_rollout import LocalBackend
from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.server import create_rollout_server


async def test_many_concurrent_rollouts_each_reach_exactly_one_terminal_result() -> None:
    statuses: dict[str, list[str]] = {}

    def observe(rollout_id: str, status: Any) -> None:
        statuses.setdefault(rollout_id, []).append(str(status))

    app = create_rollout_server(
        backend=LocalBackend(workflow=EchoWorkflow, grader=ExactGrader),
        on_status=observe,
        **{**FAST, "result_retention_sec": 30.0},
    )
    n, concurrency = 100, 32
    gate = asyncio.Semaphore(concurrency)

    with uvicorn_thread(app) as url:
        async with RolloutClient(url) as client:

            async def one(i: int) -> Any:
                async with gate:
                    return await client.run_rollout(
                        initial_messages=[{"role": "user", "content": f"row{i}"}],
                        chat_completions_url="http://127.0.0.1:9/v1",
                        rollout_id=f"r-{i}",
                        label=f"row{i}"[::-1],
                        metadata={"sleep": 0.01 * (i % 5)},
                    )

            results = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(n))), 120)

    assert [r.rollout_id for r in results] == [f"r-{i}" for i in range(n)]
    assert all(r.status == "success" and r.sample and r.sample.reward == 1.0 for r in results)
    terminal = {
        rid: [s for s in seen if s in {"success", "failure", "cancelled"}]
        for rid, seen in statuses.items()
    }
    assert len(terminal) == n
    assert all(found == ["success"] for found in terminal.values())


async def test_a_controller_that_stops_polling_loses_its_rollout_to_lease_expiry() -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        result_wait_timeout_sec=0.1,
        polling_lease_timeout_sec=0.4,
    )
    registry = app.state.osmosis_server.registry
    with uvicorn_thread(app) as url:
        async with RolloutClient(url) as client:
            handle = await client.run_rollout_async(
                initial_messages=[],
                chat_completions_url="http://127.0.0.1:9/v1",
                rollout_id="abandoned",
                metadata={"gate": "never"},
            )
            await handle.wait_for_running()
            handle.cancel()  # local polling stops; the server is not told
            await eventually(
                lambda: "abandoned" in registry.entries and registry.entries["abandoned"].finished,
                timeout=10,
            )
            result = registry.entries["abandoned"].result
            health = await client.health()
    assert result["status"] == "failure"
    assert result["err_category"] == "lease_expired"
    assert health["lifecycle"]["active_rollouts"] == 0
    Gate.get("never").set()


async def test_client_cancel_reaches_the_server_and_the_poller_sees_cancelled() -> None:
    app = make_app(workflow=GatedWorkflow, grader=None)
    with uvicorn_thread(app) as url:
        async with RolloutClient(url) as client:
            handle = await client.run_rollout_async(
                initial_messages=[],
                chat_completions_url="http://127.0.0.1:9/v1",
                rollout_id="c-1",
                metadata={"gate": "never"},
            )
            await handle.wait_for_running()
            response = await client.cancel_rollout("c-1")
            result = await asyncio.wait_for(handle, 10)
    assert response.dispositions == {"c-1": "cancelled_running"}
    assert result.status == "cancelled"
    assert result.err_message == "cancelled"
