"""Plain ``def`` run/grade: worker threads, the ambient context, and the same deadlines."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    ConcurrencyConfig,
    ExecutionRequest,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutContext,
    RolloutErrorCategory,
    RolloutStatus,
    get_rollout_context,
)

REPLY = [{"role": "assistant", "content": "done"}]
BOUND = 5.0  # every wait in these tests gives up after this many seconds


class Rewards(Grader):
    def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(1.0)


def _request(rollout_id: str, **overrides: Any) -> ExecutionRequest:
    fields: dict[str, Any] = {"id": rollout_id, "prompt": [], "label": "x"}
    fields.update(overrides)
    return ExecutionRequest(**fields)


async def _wait_for(event: threading.Event) -> None:
    assert await asyncio.to_thread(event.wait, BOUND), "the worker thread never got there"


async def test_a_plain_def_workflow_and_grader_run_off_the_event_loop() -> None:
    threads: dict[str, int] = {}

    class SyncFlow(AgentWorkflow[Any]):
        def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            threads["run"] = threading.get_ident()
            return REPLY

    class SyncGrader(Grader):
        def grade(self, ctx: GraderContext) -> None:
            threads["grade"] = threading.get_ident()
            ctx.set_reward(0.75)

    outcome = await LocalBackend(workflow=SyncFlow, grader=SyncGrader).execute(_request("s-1"))
    assert outcome.result.status is RolloutStatus.SUCCESS
    assert outcome.result.sample is not None and outcome.result.sample.reward == 0.75
    loop_thread = threading.get_ident()
    assert threads["run"] != loop_thread and threads["grade"] != loop_thread


async def test_a_blocking_sync_rollout_does_not_stall_an_async_one() -> None:
    entered, release = threading.Event(), threading.Event()
    released: list[bool] = []

    class Blocks(AgentWorkflow[Any]):
        def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            entered.set()
            released.append(release.wait(BOUND))
            return REPLY

    class Steps(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            for _ in range(5):
                await asyncio.sleep(0.001)
            return REPLY

    blocking = LocalBackend(workflow=Blocks, grader=Rewards)
    stepping = LocalBackend(workflow=Steps, grader=Rewards)
    sync_task = asyncio.create_task(blocking.execute(_request("sync")))
    await _wait_for(entered)
    # If the sync workflow ran on the loop, this could only finish after release.wait gave up.
    async_outcome = await stepping.execute(_request("async"))
    assert async_outcome.result.status is RolloutStatus.SUCCESS
    assert not sync_task.done()
    release.set()
    sync_outcome = await sync_task
    assert sync_outcome.result.status is RolloutStatus.SUCCESS
    assert released == [True]


async def test_a_sync_workflow_blocking_past_its_deadline_is_a_timeout() -> None:
    entered, release = threading.Event(), threading.Event()

    class BlocksForever(AgentWorkflow[Any]):
        def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            entered.set()
            release.wait(BOUND)
            return REPLY

    backend = LocalBackend(workflow=BlocksForever, grader=Rewards)
    try:
        outcome = await backend.execute(_request("s-2", agent_timeout_sec=0.05))
        # The result came back while the thread was still blocked: nobody waited for it.
        assert not release.is_set()
        assert entered.is_set()
        assert outcome.result.status is RolloutStatus.FAILURE
        assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT
        assert outcome.result.err_message == "workflow exceeded its 0.05s deadline"
    finally:
        release.set()
        await backend.shutdown()


async def test_a_sync_grader_blocking_past_its_deadline_is_a_timeout() -> None:
    release = threading.Event()

    class Instant(AgentWorkflow[Any]):
        def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            return REPLY

    class BlocksGrading(Grader):
        def grade(self, ctx: GraderContext) -> None:
            release.wait(BOUND)
            ctx.set_reward(1.0)

    backend = LocalBackend(workflow=Instant, grader=BlocksGrading)
    try:
        outcome = await backend.execute(_request("s-3", grader_timeout_sec=0.05))
        assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT
        assert outcome.result.err_message == "grader exceeded its 0.05s deadline"
    finally:
        release.set()
        await backend.shutdown()


async def test_a_sync_workflow_sees_its_rollout_context() -> None:
    seen: list[RolloutContext | None] = []

    class LooksUp(AgentWorkflow[Any]):
        def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            seen.append(get_rollout_context())
            return REPLY

    ambient = RolloutContext(chat_completions_url="http://127.0.0.1:9/v1", rollout_id="s-4")
    with ambient:
        await LocalBackend(workflow=LooksUp).execute(_request("s-4", grade=False))
    assert seen == [ambient]


async def test_sync_rollouts_run_as_many_at_once_as_the_limiter_allows() -> None:
    # More than the loop's default thread pool (min(32, cpus + 4)) would run at once.
    width = 12
    barrier = threading.Barrier(width, timeout=BOUND)

    class MeetsTheOthers(AgentWorkflow[Any]):
        def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            barrier.wait()  # raises BrokenBarrierError unless all `width` run together
            return REPLY

    config = AgentWorkflowConfig(name="wide", concurrency=ConcurrencyConfig(max_concurrent=width))
    backend = LocalBackend(workflow=MeetsTheOthers, workflow_config=config)
    try:
        outcomes = await asyncio.gather(
            *(backend.execute(_request(f"w-{i}", grade=False)) for i in range(width))
        )
    finally:
        await backend.shutdown()
    assert [o.result.status for o in outcomes] == [RolloutStatus.SUCCESS] * width
