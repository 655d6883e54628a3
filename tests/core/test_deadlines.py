"""Agent and grader deadlines: budgets, messages, late returns, queue time."""

from __future__ import annotations

import asyncio
import re
import time
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
    RolloutErrorCategory,
    RolloutStatus,
)

REPLY = [{"role": "assistant", "content": "done"}]


class Sleeps(AgentWorkflow[Any]):
    """Sleeps ``metadata["sleep"]`` seconds on the loop, then answers."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        assert ctx.metadata is not None
        await asyncio.sleep(ctx.metadata["sleep"])
        return REPLY


class Instant(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        return REPLY


class Rewards(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(1.0)


class SlowGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.metadata is not None
        await asyncio.sleep(ctx.metadata["grade_sleep"])
        ctx.set_reward(1.0)


def _request(**overrides: Any) -> ExecutionRequest:
    fields: dict[str, Any] = {"id": "d-1", "prompt": [], "label": "x"}
    fields.update(overrides)
    return ExecutionRequest(**fields)


async def test_a_workflow_past_its_deadline_is_a_timeout_result() -> None:
    backend = LocalBackend(workflow=Sleeps, grader=Rewards)
    outcome = await backend.execute(_request(agent_timeout_sec=0.05, metadata={"sleep": 30}))
    assert outcome.grader is None
    assert outcome.result.status is RolloutStatus.FAILURE
    assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT
    assert outcome.result.err_message == "workflow exceeded its 0.05s deadline"


async def test_the_grader_deadline_is_independent_of_the_agent_deadline() -> None:
    # The grader alone outlasts the agent deadline; only its own deadline applies to it.
    backend = LocalBackend(workflow=Instant, grader=SlowGrader)
    outcome = await backend.execute(
        _request(agent_timeout_sec=0.15, grader_timeout_sec=5.0, metadata={"grade_sleep": 0.4})
    )
    assert outcome.result.status is RolloutStatus.SUCCESS
    assert outcome.result.sample is not None and outcome.result.sample.reward == 1.0


async def test_a_grader_past_its_own_deadline_is_a_timeout_result() -> None:
    backend = LocalBackend(workflow=Instant, grader=SlowGrader)
    outcome = await backend.execute(
        _request(agent_timeout_sec=30.0, grader_timeout_sec=0.05, metadata={"grade_sleep": 30})
    )
    assert outcome.workflow.status is RolloutStatus.SUCCESS
    assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT
    assert outcome.result.err_message == "grader exceeded its 0.05s deadline"


async def test_no_deadline_runs_unbounded() -> None:
    backend = LocalBackend(workflow=Sleeps, grader=Rewards)
    outcome = await backend.execute(_request(metadata={"sleep": 0.05}))
    assert outcome.result.status is RolloutStatus.SUCCESS


async def test_a_workflow_finishing_inside_its_deadline_succeeds() -> None:
    backend = LocalBackend(workflow=Sleeps, grader=Rewards)
    outcome = await backend.execute(_request(agent_timeout_sec=5.0, metadata={"sleep": 0.01}))
    assert outcome.result.status is RolloutStatus.SUCCESS


async def test_a_user_raised_timeout_error_keeps_its_own_message() -> None:
    class UpstreamTimesOut(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            raise TimeoutError("model endpoint read timed out")

    outcome = await LocalBackend(workflow=UpstreamTimesOut).execute(
        _request(agent_timeout_sec=30.0)
    )
    assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT
    assert outcome.result.err_message == "model endpoint read timed out"


async def test_a_swallowed_cancellation_is_still_a_timeout() -> None:
    class SwallowsCancel(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                pass
            return REPLY

    outcome = await LocalBackend(workflow=SwallowsCancel, grader=Rewards).execute(
        _request(agent_timeout_sec=0.05)
    )
    assert outcome.grader is None
    assert outcome.result.status is RolloutStatus.FAILURE
    assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT
    assert outcome.result.err_message == "workflow exceeded its 0.05s deadline"


async def test_a_grader_swallowing_its_cancellation_is_still_a_timeout() -> None:
    class SwallowingGrader(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                pass
            ctx.set_reward(1.0)

    outcome = await LocalBackend(workflow=Instant, grader=SwallowingGrader).execute(
        _request(grader_timeout_sec=0.05)
    )
    assert outcome.result.status is RolloutStatus.FAILURE
    assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT
    assert outcome.result.err_message == "grader exceeded its 0.05s deadline"
    assert outcome.result.sample is not None


async def test_async_code_blocking_the_loop_past_the_deadline_is_still_a_timeout() -> None:
    class BlocksTheLoop(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            time.sleep(0.2)  # sync call inside async def: the deadline cannot interrupt it
            return REPLY

    outcome = await LocalBackend(workflow=BlocksTheLoop, grader=Rewards).execute(
        _request(agent_timeout_sec=0.05)
    )
    assert outcome.result.status is RolloutStatus.FAILURE
    assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT
    assert outcome.result.err_message == "workflow exceeded its 0.05s deadline"


async def test_a_grader_blocking_the_loop_past_its_deadline_is_still_a_timeout() -> None:
    class BlockingGrader(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            time.sleep(0.2)
            ctx.set_reward(1.0)

    outcome = await LocalBackend(workflow=Instant, grader=BlockingGrader).execute(
        _request(grader_timeout_sec=0.05)
    )
    assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT


async def test_queue_time_counts_against_the_agent_deadline() -> None:
    config = AgentWorkflowConfig(name="one", concurrency=ConcurrencyConfig(max_concurrent=1))
    backend = LocalBackend(workflow=Sleeps, workflow_config=config)
    holder = asyncio.create_task(backend.execute(_request(id="holder", metadata={"sleep": 0.3})))
    while backend.limiter.running == 0:
        await asyncio.sleep(0.001)
    # Alone this rollout would finish well inside 0.2 s, but it waits ~0.3 s for the slot.
    queued = await backend.execute(
        _request(id="queued", agent_timeout_sec=0.2, metadata={"sleep": 0.01}, grade=False)
    )
    await holder
    assert queued.result.status is RolloutStatus.FAILURE
    assert queued.result.err_category is RolloutErrorCategory.TIMEOUT
    message = queued.result.err_message or ""
    assert message.startswith("workflow exceeded its 0.2s deadline")
    assert re.search(r"\(\d+\.\ds of it spent queued\)$", message), message


async def test_the_deadline_message_omits_a_negligible_queue_time() -> None:
    outcome = await LocalBackend(workflow=Sleeps).execute(
        _request(agent_timeout_sec=0.05, metadata={"sleep": 30})
    )
    assert "queued" not in (outcome.result.err_message or "")
