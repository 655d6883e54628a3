"""Our client driving our server over real loopback HTTP, with dropped polls."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    Grader,
    GraderContext,
    LocalBackend,
)
from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.server import create_rollout_server
from osmosis_rollout.types import POLLING_LEASE_HEADER, RolloutStatus

Serve = Callable[[Any], contextlib.AbstractContextManager[str]]

workflow_runs: Counter[str] = Counter()
runs_lock = threading.Lock()
cancelled_runs: set[str] = set()


class ReverseWorkflow(AgentWorkflow[Any]):
    """Answers with the prompt reversed after ``metadata['sleep']`` s; counts its runs."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        meta = ctx.metadata or {}
        with runs_lock:
            workflow_runs[meta["id"]] += 1
        try:
            await asyncio.sleep(meta.get("sleep", 0))
        except asyncio.CancelledError:
            cancelled_runs.add(meta["id"])
            raise
        text = str(ctx.prompt[-1]["content"])
        return [*ctx.prompt, {"role": "assistant", "content": text[::-1]}]


class ExactGrader(Grader):
    """1.0 when the answer equals the label."""

    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


class FlakyTransport(httpx.AsyncBaseTransport):
    """Drops ~20% of result polls: half before sending, half after the server answered.

    At most two drops in a row per rollout, the client's transport retry budget, so every
    rollout must still finish; a drop after sending loses a response the server already
    counted (lease renewed, perhaps the terminal result delivered).
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, *, seed: int, rate: float) -> None:
        self.inner, self.rng, self.rate = inner, random.Random(seed), rate
        self.streak: Counter[str] = Counter()
        self.dropped_before = self.dropped_after = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method != "GET" or not path.endswith("/result"):
            return await self.inner.handle_async_request(request)
        rollout_id = path.split("/")[2]
        roll = self.rng.random() if self.streak[rollout_id] < 2 else 1.0
        if roll < self.rate / 2:
            self.streak[rollout_id] += 1
            self.dropped_before += 1
            raise httpx.RemoteProtocolError("injected: dropped before sending", request=request)
        response = await self.inner.handle_async_request(request)
        if roll < self.rate:
            await response.aread()
            await response.aclose()
            self.streak[rollout_id] += 1
            self.dropped_after += 1
            raise httpx.RemoteProtocolError("injected: response lost", request=request)
        self.streak[rollout_id] = 0
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def make_server(**timings: Any) -> Any:
    backend = LocalBackend(workflow=ReverseWorkflow, grader=ExactGrader)
    return create_rollout_server(backend=backend, configure_logging=False, **timings)


async def test_200_rollouts_at_concurrency_32_each_end_once_despite_dropped_polls(
    serve: Serve,
) -> None:
    workflow_runs.clear()
    app = make_server(result_wait_timeout_sec=0.5, polling_lease_timeout_sec=30.0)
    transport = FlakyTransport(
        httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=None)), seed=7, rate=0.2
    )
    rng = random.Random(3)
    sleeps = {f"e2e-{i}": rng.choice([0.0, 0.01, 0.05, 0.2]) for i in range(200)}
    results: dict[str, list[Any]] = {rid: [] for rid in sleeps}
    slots = asyncio.Semaphore(32)

    async def one(client: RolloutClient, rollout_id: str) -> None:
        async with slots:
            handle = await client.run_rollout_async(
                [{"role": "user", "content": rollout_id}],
                "http://127.0.0.1:9/v1",
                rollout_id,
                label=rollout_id[::-1],
                metadata={"id": rollout_id, "sleep": sleeps[rollout_id]},
            )
            results[rollout_id].append(await handle)

    with serve(app) as url:
        async with (
            httpx.AsyncClient(transport=transport, timeout=5.0) as http,
            RolloutClient(url, http_client=http) as client,
        ):
            async with asyncio.timeout(60):
                await asyncio.gather(*(one(client, rid) for rid in sleeps))
                idle = await client.wait_idle(timeout_sec=10, poll_interval_sec=0.05)

    assert transport.dropped_before > 10 and transport.dropped_after > 10
    assert idle["lifecycle"]["active_rollouts"] == 0
    assert workflow_runs == Counter(dict.fromkeys(sleeps, 1))
    for rollout_id, seen in results.items():
        assert len(seen) == 1, rollout_id
        (result,) = seen
        assert result.rollout_id == rollout_id
        assert result.status == RolloutStatus.SUCCESS, (rollout_id, result)
        assert result.sample is not None and result.sample.reward == 1.0


async def test_a_controller_that_stops_polling_loses_its_rollout_to_lease_expiry(
    serve: Serve,
) -> None:
    cancelled_runs.clear()
    app = make_server(result_wait_timeout_sec=0.2, polling_lease_timeout_sec=0.6)
    with serve(app) as url:
        async with RolloutClient(url) as client:
            handle = await client.run_rollout_async(
                [{"role": "user", "content": "abc"}],
                "http://127.0.0.1:9/v1",
                "abandoned",
                metadata={"id": "abandoned", "sleep": 30},
            )
            assert await handle.wait_for_running() == RolloutStatus.RUNNING
            handle.cancel()
            await client.wait_idle(timeout_sec=10, poll_interval_sec=0.05)
            late = await client.http_client.get(
                f"{url}/rollout/abandoned/result",
                headers={POLLING_LEASE_HEADER: handle.admission.polling_lease_token},
            )
    assert late.status_code == 200
    assert late.json() == {
        "rollout_id": "abandoned",
        "status": "failure",
        "sample": None,
        "err_message": "polling lease expired",
        "err_category": "lease_expired",
    }
    assert cancelled_runs == {"abandoned"}


async def test_a_controller_that_keeps_polling_outlives_many_lease_periods(
    serve: Serve,
) -> None:
    app = make_server(result_wait_timeout_sec=0.2, polling_lease_timeout_sec=0.6)
    with serve(app) as url:
        async with RolloutClient(url) as client:
            result = await client.run_rollout(
                [{"role": "user", "content": "abc"}],
                "http://127.0.0.1:9/v1",
                "kept",
                label="cba",
                metadata={"id": "kept", "sleep": 1.5},
            )
    assert result.status == RolloutStatus.SUCCESS
    assert result.sample is not None and result.sample.reward == 1.0


async def test_cancel_rollout_over_loopback_ends_the_polled_rollout_as_cancelled(
    serve: Serve,
) -> None:
    app = make_server(result_wait_timeout_sec=0.5, polling_lease_timeout_sec=30.0)
    with serve(app) as url:
        async with RolloutClient(url) as client:
            handle = await client.run_rollout_async(
                [{"role": "user", "content": "abc"}],
                "http://127.0.0.1:9/v1",
                "to-cancel",
                metadata={"id": "to-cancel", "sleep": 30},
            )
            await handle.wait_for_running()
            answer = await client.cancel_rollout("to-cancel")
            result = await handle
            again = await client.cancel_rollout("to-cancel")
    assert answer.dispositions == {"to-cancel": "cancelled_running"}
    assert result.status == RolloutStatus.CANCELLED
    assert again.dispositions == {"to-cancel": "not_found"}
