"""The concurrency limiter, LocalBackend's slot defaults, and ``max_queue_depth``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    ConcurrencyConfig,
    ExecutionRequest,
    GraderConfig,
    LocalBackend,
    RolloutStatus,
)
from osmosis_rollout._internal.limiter import ConcurrencyLimiter


class Waits(AgentWorkflow[Any]):
    """Holds its slot until the test sets the event in its metadata."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        assert ctx.metadata is not None
        await asyncio.wait_for(ctx.metadata["release"].wait(), 5)
        return [{"role": "assistant", "content": "ok"}]


def _config(max_concurrent: int | None) -> AgentWorkflowConfig:
    return AgentWorkflowConfig(
        name="c", concurrency=ConcurrencyConfig(max_concurrent=max_concurrent)
    )


async def _until(predicate: Any) -> None:
    async with asyncio.timeout(5):
        while not predicate():
            await asyncio.sleep(0.001)


def _request(i: int, release: asyncio.Event) -> ExecutionRequest:
    return ExecutionRequest(id=f"r-{i}", prompt=[], metadata={"release": release}, grade=False)


async def test_an_unbounded_limiter_never_queues() -> None:
    limiter = ConcurrencyLimiter(max_concurrent=None)
    release = asyncio.Event()

    async def hold() -> None:
        async with limiter.acquire():
            await release.wait()

    tasks = [asyncio.create_task(hold()) for _ in range(50)]
    await _until(lambda: limiter.running == 50)
    assert limiter.snapshot() == {"max_concurrent": None, "queued": 0, "running": 50}
    release.set()
    await asyncio.gather(*tasks)
    assert limiter.snapshot() == {"max_concurrent": None, "queued": 0, "running": 0}


async def test_a_limit_of_one_runs_holders_one_after_another() -> None:
    limiter = ConcurrencyLimiter(max_concurrent=1)
    inside: list[int] = []
    peak = 0

    async def hold(i: int) -> None:
        nonlocal peak
        async with limiter.acquire():
            inside.append(i)
            peak = max(peak, len(inside))
            await asyncio.sleep(0.001)
            inside.remove(i)

    await asyncio.gather(*(hold(i) for i in range(5)))
    assert peak == 1


async def test_the_snapshot_counts_waiters_and_holders() -> None:
    limiter = ConcurrencyLimiter(max_concurrent=2)
    release = asyncio.Event()

    async def hold() -> None:
        async with limiter.acquire():
            await release.wait()

    tasks = [asyncio.create_task(hold()) for _ in range(5)]
    await _until(lambda: limiter.queued == 3)
    assert limiter.snapshot() == {"max_concurrent": 2, "queued": 3, "running": 2}
    release.set()
    await asyncio.gather(*tasks)
    assert limiter.snapshot() == {"max_concurrent": 2, "queued": 0, "running": 0}


@pytest.mark.parametrize("max_concurrent", [1, None], ids=["bounded", "unbounded"])
async def test_running_is_restored_when_the_holder_raises(max_concurrent: int | None) -> None:
    limiter = ConcurrencyLimiter(max_concurrent=max_concurrent)
    with pytest.raises(RuntimeError):
        async with limiter.acquire():
            assert limiter.running == 1
            raise RuntimeError("boom")
    assert limiter.snapshot()["running"] == 0
    async with limiter.acquire():  # the slot came back
        assert limiter.running == 1


async def test_queued_is_restored_when_a_waiter_is_cancelled() -> None:
    limiter = ConcurrencyLimiter(max_concurrent=1)
    release = asyncio.Event()

    async def hold() -> None:
        async with limiter.acquire():
            await release.wait()

    holder = asyncio.create_task(hold())
    waiter = asyncio.create_task(hold())
    await _until(lambda: limiter.queued == 1)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert limiter.snapshot() == {"max_concurrent": 1, "queued": 0, "running": 1}
    release.set()
    await holder
    assert limiter.snapshot()["running"] == 0


def test_a_limit_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_concurrent"):
        ConcurrencyLimiter(max_concurrent=0)


def test_local_backend_defaults_to_four_slots_without_a_config() -> None:
    assert LocalBackend(workflow=Waits).limiter.max_concurrent == 4


def test_local_backend_takes_its_slots_from_the_workflow_config() -> None:
    assert LocalBackend(workflow=Waits, workflow_config=_config(7)).limiter.max_concurrent == 7


def test_a_config_without_a_limit_makes_local_backend_unbounded() -> None:
    assert (
        LocalBackend(workflow=Waits, workflow_config=_config(None)).limiter.max_concurrent is None
    )


def test_the_grader_config_concurrency_is_ignored() -> None:
    grader_config = GraderConfig(name="g", concurrency=ConcurrencyConfig(max_concurrent=1))
    backend = LocalBackend(workflow=Waits, grader_config=grader_config)
    assert backend.limiter.max_concurrent == 4


def test_a_concurrency_config_below_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_concurrent"):
        ConcurrencyConfig(max_concurrent=0)


async def test_local_backend_runs_at_most_its_slots_and_queues_the_rest() -> None:
    backend = LocalBackend(workflow=Waits)
    release = asyncio.Event()
    tasks = [asyncio.create_task(backend.execute(_request(i, release))) for i in range(6)]
    await _until(lambda: backend.limiter.queued == 2)
    assert backend.health()["concurrency"] == {"max_concurrent": 4, "queued": 2, "running": 4}
    release.set()
    outcomes = await asyncio.gather(*tasks)
    assert {o.result.status for o in outcomes} == {RolloutStatus.SUCCESS}
    assert backend.health()["concurrency"] == {"max_concurrent": 4, "queued": 0, "running": 0}


async def test_has_capacity_is_always_true_without_a_queue_depth() -> None:
    backend = LocalBackend(workflow=Waits, workflow_config=_config(1))
    release = asyncio.Event()
    tasks = [asyncio.create_task(backend.execute(_request(i, release))) for i in range(4)]
    await _until(lambda: backend.limiter.queued == 3)
    assert backend.has_capacity() is True
    release.set()
    await asyncio.gather(*tasks)


async def test_max_queue_depth_makes_has_capacity_false_once_that_many_wait() -> None:
    backend = LocalBackend(workflow=Waits, workflow_config=_config(1), max_queue_depth=1)
    release = asyncio.Event()
    assert backend.has_capacity() is True
    first = asyncio.create_task(backend.execute(_request(0, release)))
    await _until(lambda: backend.limiter.running == 1)
    assert backend.has_capacity() is True  # one more may queue
    second = asyncio.create_task(backend.execute(_request(1, release)))
    await _until(lambda: backend.limiter.queued == 1)
    assert backend.has_capacity() is False
    assert backend.health()["max_queue_depth"] == 1
    release.set()
    await asyncio.gather(first, second)
    assert backend.has_capacity() is True


async def test_a_queue_depth_of_zero_admits_only_while_a_slot_is_free() -> None:
    backend = LocalBackend(workflow=Waits, workflow_config=_config(2), max_queue_depth=0)
    release = asyncio.Event()
    first = asyncio.create_task(backend.execute(_request(0, release)))
    await _until(lambda: backend.limiter.running == 1)
    assert backend.has_capacity() is True
    second = asyncio.create_task(backend.execute(_request(1, release)))
    await _until(lambda: backend.limiter.running == 2)
    assert backend.has_capacity() is False
    release.set()
    await asyncio.gather(first, second)


def test_a_negative_queue_depth_is_rejected() -> None:
    with pytest.raises(ValueError, match="max_queue_depth"):
        LocalBackend(workflow=Waits, max_queue_depth=-1)


def test_a_backend_can_be_reused_across_event_loops() -> None:
    # A fixture-held backend outlives one test's loop; its slots must work on the next.
    class Yields(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            await asyncio.sleep(0.001)
            return [{"role": "assistant", "content": "ok"}]

    backend = LocalBackend(workflow=Yields, workflow_config=_config(1))

    async def contend() -> set[RolloutStatus]:
        outcomes = await asyncio.gather(
            *(
                backend.execute(ExecutionRequest(id=f"l-{i}", prompt=[], grade=False))
                for i in range(3)
            )
        )
        return {o.result.status for o in outcomes}

    for _ in range(2):
        assert asyncio.run(contend()) == {RolloutStatus.SUCCESS}
    assert backend.limiter.snapshot() == {"max_concurrent": 1, "queued": 0, "running": 0}
