"""Adaptive concurrency (issue 27, defect 1): the AIMD limit, the queue measured in
seconds, deadline-aware admission, and what ``/health`` and ``/metrics`` show."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from server_support import Gate, GatedWorkflow, admit, init_body, make_app, serving

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    ConcurrencyConfig,
    ExecutionRequest,
    LocalBackend,
)
from osmosis_rollout._internal.limiter import ConcurrencyLimiter
from osmosis_rollout.server.concurrency import (
    AdmissionControl,
    AimdLimit,
    AimdPolicy,
    SlotLatency,
    parse_max_concurrent,
)

POLICY = AimdPolicy(initial_limit=10)


def _config(max_concurrent: int | None) -> AgentWorkflowConfig:
    return AgentWorkflowConfig(
        name="c", concurrency=ConcurrencyConfig(max_concurrent=max_concurrent)
    )


def test_event_loop_lag_over_its_target_two_intervals_running_backs_the_limit_off() -> None:
    aimd = AimdLimit(ceiling=None, policy=POLICY)
    assert aimd.update(loop_lag_sec=0.2, latency_congested=False, running=10) == 10
    assert aimd.state == "holding"  # one late interval is a burst
    assert aimd.update(loop_lag_sec=0.2, latency_congested=False, running=10) == 8
    assert aimd.state == "backing_off"


def test_the_limit_grows_only_while_the_running_rollouts_fill_it() -> None:
    aimd = AimdLimit(ceiling=None, policy=POLICY)
    assert aimd.update(loop_lag_sec=0.0, latency_congested=False, running=3) == 10
    assert aimd.state == "holding"
    assert aimd.update(loop_lag_sec=0.0, latency_congested=False, running=10) == 15


def test_slow_start_multiplies_until_the_first_congestion_then_growth_is_additive() -> None:
    aimd = AimdLimit(ceiling=None, policy=AimdPolicy(initial_limit=100))
    assert aimd.update(loop_lag_sec=0.0, latency_congested=False, running=100) == 150
    assert aimd.update(loop_lag_sec=0.0, latency_congested=True, running=150) == 120
    assert aimd.update(loop_lag_sec=0.0, latency_congested=False, running=120) == 130


def test_the_limit_never_passes_the_rollouts_own_max_concurrent_nor_drops_below_one() -> None:
    aimd = AimdLimit(ceiling=12, policy=POLICY)
    for _ in range(5):
        aimd.update(loop_lag_sec=0.0, latency_congested=False, running=aimd.current)
    assert aimd.current == 12
    assert aimd.state == "at_ceiling"
    for _ in range(30):
        aimd.update(loop_lag_sec=1.0, latency_congested=False, running=0)
    assert aimd.current == 1


def test_latency_past_twice_its_baseline_is_congestion() -> None:
    latency = SlotLatency(AimdPolicy(latency_smoothing=1.0))
    latency.observe(2.0)
    latency.observe(3.0)
    assert not latency.congested()
    latency.observe(5.0)
    assert latency.congested()


async def test_a_raised_limit_starts_waiters_at_once_and_a_lowered_one_starts_none() -> None:
    limiter = ConcurrencyLimiter(max_concurrent=1)
    release = asyncio.Event()

    async def hold() -> None:
        async with limiter.acquire():
            await release.wait()

    tasks = [asyncio.create_task(hold()) for _ in range(4)]
    await asyncio.sleep(0)
    assert limiter.snapshot() == {"max_concurrent": 1, "queued": 3, "running": 1}
    limiter.set_limit(3)
    await asyncio.sleep(0)
    assert limiter.snapshot() == {"max_concurrent": 3, "queued": 1, "running": 3}
    limiter.set_limit(1)
    release.set()
    await asyncio.gather(*tasks)
    assert limiter.snapshot() == {"max_concurrent": 1, "queued": 0, "running": 0}


def test_a_slot_granted_to_a_waiter_cancelled_meanwhile_passes_to_the_next() -> None:
    async def scenario() -> dict[str, int | None]:
        limiter = ConcurrencyLimiter(max_concurrent=1)
        release = asyncio.Event()
        started: list[int] = []

        async def hold(i: int) -> None:
            async with limiter.acquire():
                started.append(i)
                await release.wait()

        first = asyncio.create_task(hold(0))
        await asyncio.sleep(0)
        second, third = asyncio.create_task(hold(1)), asyncio.create_task(hold(2))
        await asyncio.sleep(0)
        limiter.set_limit(2)  # grants the slot to the second waiter...
        second.cancel()  # ...which is cancelled before it runs
        await asyncio.sleep(0)
        release.set()
        await asyncio.gather(first, third)
        with pytest.raises(asyncio.CancelledError):
            await second
        assert started == [0, 2]
        return limiter.snapshot()

    assert asyncio.run(scenario()) == {"max_concurrent": 2, "queued": 0, "running": 0}


@pytest.mark.parametrize("value", ["auto", "3", 3])
def test_max_concurrent_is_auto_or_a_positive_integer(value: Any) -> None:
    assert parse_max_concurrent(value) in ("auto", 3)


@pytest.mark.parametrize("value", ["0", "-2", "many", 0, True, 2.5])
def test_a_bad_max_concurrent_names_the_value(value: Any) -> None:
    with pytest.raises(ValueError, match="max_concurrent must be 'auto' or a positive"):
        parse_max_concurrent(value)


async def _fill(backend: LocalBackend, count: int, gate: str) -> list[asyncio.Task[Any]]:
    """Start ``count`` rollouts that hold their slot until the gate opens."""
    tasks = [
        asyncio.create_task(
            backend.execute(ExecutionRequest(id=f"{gate}-{i}", prompt=[], metadata={"gate": gate}))
        )
        for i in range(count)
    ]
    await asyncio.sleep(0)
    return tasks


async def test_the_queue_is_measured_in_seconds_of_waiting_at_the_measured_rate() -> None:
    backend = LocalBackend(workflow=GatedWorkflow, workflow_config=_config(None))
    control = AdmissionControl(backend, 4, policy=AimdPolicy(queue_window_sec=10))
    assert control.queue_bound == 4  # nothing finished yet: one limit's worth
    tasks = await _fill(backend, 24, "q")
    assert backend.limiter.snapshot() == {"max_concurrent": 4, "queued": 20, "running": 4}
    assert backend.limiter.on_release is not None
    for _ in range(3):
        backend.limiter.on_release(2.0)  # as finished rollouts report: 4 running / 2 s
    assert control.queue_bound == 20  # 10 s of waiting at 2/s
    assert not control.admits()
    assert 5 <= int(control.retry_after()) <= 15  # 20 waiting at 2/s: about 10 s
    Gate.get("q").set()
    await asyncio.gather(*tasks)
    assert control.admits()


async def test_a_rollout_that_could_not_finish_by_its_deadline_is_not_queued() -> None:
    backend = LocalBackend(workflow=GatedWorkflow, workflow_config=_config(None))
    control = AdmissionControl(backend, 2)
    tasks = await _fill(backend, 4, "d")  # 2 running, 2 waiting
    assert backend.limiter.on_release is not None
    backend.limiter.on_release(1.0)  # 2 running / 1 s: the 3rd waiting would start in 1.5 s
    assert control.admits(agent_timeout_sec=None)
    assert control.admits(agent_timeout_sec=10.0)
    assert not control.admits(agent_timeout_sec=3.0)  # 1.5 s + 1 s > 80% of 3 s
    Gate.get("d").set()
    await asyncio.gather(*tasks)
    assert control.admits(agent_timeout_sec=1.2)  # a free slot: runs at once


async def test_max_queue_depth_replaces_the_queue_bound() -> None:
    backend = LocalBackend(workflow=GatedWorkflow, workflow_config=_config(8), max_queue_depth=1)
    control = AdmissionControl(backend, 2)
    assert control.limit == 2
    assert control.queue_bound == 1
    tasks = await _fill(backend, 3, "m")
    assert not control.admits()
    Gate.get("m").set()
    await asyncio.gather(*tasks)


def test_a_fixed_limit_is_capped_by_the_rollouts_own_max_concurrent() -> None:
    backend = LocalBackend(workflow=GatedWorkflow, workflow_config=_config(3))
    assert AdmissionControl(backend, 50).limit == 3


async def test_admissions_past_the_limit_and_queue_get_429_with_retry_after() -> None:
    app = make_app(workflow=GatedWorkflow, grader=None, max_concurrent=1, max_queue_depth=1)
    async with serving(app) as client:
        await admit(client, "a", metadata={"gate": "g"})
        await admit(client, "b", metadata={"gate": "g"})
        refused = await client.post("/rollout", json=init_body("c", metadata={"gate": "g"}))
        health = (await client.get("/health")).json()
        Gate.get("g").set()
    assert refused.status_code == 429
    assert refused.json() == {"detail": "rollout queue is full; retry later"}
    assert int(refused.headers["retry-after"]) >= 1
    assert health["admission"]["mode"] == "fixed"
    assert health["admission"]["limit"] == 1
    assert health["admission"]["queue_bound"] == 1
    assert health["concurrency"]["max_concurrent"] == 1
    assert health["lifecycle"]["active_rollouts"] == 2


async def test_health_and_metrics_show_the_adaptive_limit_and_its_signals() -> None:
    app = make_app(max_concurrent="auto", enable_metrics=True)
    async with serving(app) as client:
        await admit(client, "one")
        health = (await client.get("/health")).json()
        metrics = (await client.get("/metrics")).text
    admission = health["admission"]
    assert admission["mode"] == "auto"
    assert admission["limit"] == health["concurrency"]["max_concurrent"] == 4
    assert admission["ceiling"] == 4
    assert admission["state"] in {"starting", "holding", "growing", "at_ceiling"}
    assert "osmosis_concurrency_limit 4" in metrics
    assert 'osmosis_concurrency_limit_info{mode="auto",' in metrics
    assert "osmosis_event_loop_lag_seconds " in metrics


def test_max_concurrent_needs_a_backend_with_a_limiter() -> None:
    from osmosis_rollout.backend.base import ExecutionBackend
    from osmosis_rollout.server import create_rollout_server

    class Bare(ExecutionBackend):
        async def execute(self, request: Any) -> Any:
            raise AssertionError("never run")

    with pytest.raises(TypeError, match="no concurrency limiter of its own"):
        create_rollout_server(backend=Bare(), max_concurrent="auto", configure_logging=False)


@pytest.mark.parametrize("mode", ["auto", "fixed"])
async def test_sync_workflow_threads_follow_a_limit_raised_after_the_first_rollout(
    mode: str,
) -> None:
    width = 12
    barrier = threading.Barrier(width, timeout=5)

    class MeetsTheOthers(AgentWorkflow[Any]):
        def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            if ctx.metadata and ctx.metadata.get("meet"):
                barrier.wait()  # BrokenBarrierError unless all `width` run at once
            return [{"role": "assistant", "content": "met"}]

    backend = LocalBackend(workflow=MeetsTheOthers, workflow_config=_config(width))
    admission = AdmissionControl(
        backend, "auto" if mode == "auto" else 4, policy=AimdPolicy(initial_limit=4)
    )
    try:
        first = await backend.execute(ExecutionRequest(id="first", prompt=[], grade=False))
        assert first.workflow.status.value == "success"
        # What the adaptive limit's growth (or a new fixed limit) does, after threads exist.
        admission.limiter.set_limit(width)
        outcomes = await asyncio.gather(
            *(
                backend.execute(
                    ExecutionRequest(id=f"w-{i}", prompt=[], grade=False, metadata={"meet": 1})
                )
                for i in range(width)
            )
        )
    finally:
        await backend.shutdown()
    assert [o.workflow.status.value for o in outcomes] == ["success"] * width
