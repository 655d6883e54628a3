"""Spec I.2.4, one test per row, and the rules that pick ``result`` / ``result_to_save``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutErrorCategory,
    RolloutSample,
    RolloutStatus,
)

MESSAGES = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]


class Answers(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        return AgentWorkflowOutput(messages=MESSAGES)


class ReturnsNoMessages(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
        return AgentWorkflowOutput(messages=None)


class Crashes(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
        raise RuntimeError("tool exploded")


class Hangs(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
        await asyncio.sleep(30)


class Exact(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


class Removes(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.sample.remove_sample = True


class GraderCrashes(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        raise KeyError("expected_answer")


class GraderHangs(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        await asyncio.sleep(30)


class GraderForgets(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        return None


def _request(**overrides: Any) -> ExecutionRequest:
    fields: dict[str, Any] = {"id": "row-1", "prompt": MESSAGES[:1], "label": "4"}
    fields.update(overrides)
    return ExecutionRequest(**fields)


async def _run(
    workflow: type[AgentWorkflow[Any]], grader: type[Grader] | None, **req: Any
) -> ExecutionOutcome:
    return await LocalBackend(workflow=workflow, grader=grader).execute(_request(**req))


async def test_workflow_and_grader_succeeding_is_success_with_the_reward_set() -> None:
    result = (await _run(Answers, Exact)).result
    assert result.status is RolloutStatus.SUCCESS
    assert result.sample is not None and result.sample.reward == 1.0
    assert result.err_message is None and result.err_category is None


async def test_a_removed_sample_is_success_without_a_reward() -> None:
    result = (await _run(Answers, Removes)).result
    assert result.status is RolloutStatus.SUCCESS
    assert result.sample is not None
    assert result.sample.remove_sample is True and result.sample.reward is None
    assert result.err_message is None and result.err_category is None


async def test_grade_false_returns_the_ungraded_workflow_sample() -> None:
    outcome = await _run(Answers, Exact, grade=False)
    assert outcome.grader is None
    assert outcome.result.status is RolloutStatus.SUCCESS
    assert outcome.result.sample is not None and outcome.result.sample.reward is None


async def test_a_workflow_exception_is_failure_with_message_and_category() -> None:
    outcome = await _run(Crashes, Exact)
    assert outcome.grader is None
    result = outcome.result
    assert result.status is RolloutStatus.FAILURE and result.sample is None
    assert result.err_message == "tool exploded"
    assert result.err_category is RolloutErrorCategory.AGENT_ERROR


async def test_a_workflow_timeout_is_failure_with_the_deadline_message() -> None:
    result = (await _run(Hangs, Exact, agent_timeout_sec=0.05)).result
    assert result.status is RolloutStatus.FAILURE and result.sample is None
    assert result.err_message == "workflow exceeded its 0.05s deadline"
    assert result.err_category is RolloutErrorCategory.TIMEOUT


async def test_no_grader_is_a_bare_failure_with_both_error_fields_null() -> None:
    outcome = await _run(Answers, None)
    result = outcome.result
    assert result.status is RolloutStatus.FAILURE
    assert result.sample is None
    assert result.err_message is None and result.err_category is None
    assert outcome.workflow.status is RolloutStatus.SUCCESS


async def test_neither_label_nor_metadata_is_a_bare_failure_even_with_a_grader() -> None:
    result = (await _run(Answers, Exact, label=None, metadata=None)).result
    assert result.status is RolloutStatus.FAILURE and result.sample is None
    assert result.err_message is None and result.err_category is None


async def test_no_sample_to_grade_is_a_validation_error() -> None:
    result = (await _run(ReturnsNoMessages, GraderForgets)).result
    assert result.status is RolloutStatus.FAILURE and result.sample is None
    assert result.err_message is not None and result.err_message.startswith("No sample to grade")
    assert result.err_category is RolloutErrorCategory.VALIDATION_ERROR


async def test_a_grader_exception_fails_and_keeps_the_sample() -> None:
    result = (await _run(Answers, GraderCrashes)).result
    assert result.status is RolloutStatus.FAILURE
    assert result.sample is not None and list(result.sample.messages) == MESSAGES
    assert result.err_message == "'expected_answer'"
    assert result.err_category is RolloutErrorCategory.AGENT_ERROR


async def test_a_grader_timeout_fails_and_keeps_the_sample() -> None:
    result = (await _run(Answers, GraderHangs, grader_timeout_sec=0.05)).result
    assert result.status is RolloutStatus.FAILURE and result.sample is not None
    assert result.err_message == "grader exceeded its 0.05s deadline"
    assert result.err_category is RolloutErrorCategory.TIMEOUT


async def test_a_grader_that_sets_no_reward_is_a_validation_error_with_the_sample() -> None:
    result = (await _run(Answers, GraderForgets)).result
    assert result.status is RolloutStatus.FAILURE and result.sample is not None
    assert result.sample.reward is None
    assert result.err_message == "Sample has no reward after grading"
    assert result.err_category is RolloutErrorCategory.VALIDATION_ERROR


async def test_cancelling_a_rollout_propagates_and_frees_its_slot() -> None:
    # The server turns this CancelledError into the "cancelled" row of the table.
    backend = LocalBackend(workflow=Hangs, grader=Exact)
    task = asyncio.create_task(backend.execute(_request()))
    while backend.limiter.running == 0:
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert backend.health()["concurrency"] == {"max_concurrent": 4, "queued": 0, "running": 0}


def _sample(reward: float | None = None) -> RolloutSample:
    return RolloutSample(messages=MESSAGES, reward=reward)


def test_result_of_a_failed_workflow_borrows_the_grader_sample() -> None:
    grader_sample = _sample()
    outcome = ExecutionOutcome(
        workflow=ExecutionResult(
            status=RolloutStatus.FAILURE,
            err_message="x",
            err_category=RolloutErrorCategory.AGENT_ERROR,
        ),
        grader=ExecutionResult(status=RolloutStatus.FAILURE, sample=grader_sample),
    )
    assert outcome.result.sample is grader_sample
    assert outcome.result.err_message == "x"
    assert outcome.workflow.sample is None


def test_result_of_a_failed_workflow_keeps_its_own_sample() -> None:
    own = _sample()
    outcome = ExecutionOutcome(
        workflow=ExecutionResult(status=RolloutStatus.FAILURE, sample=own),
        grader=ExecutionResult(status=RolloutStatus.SUCCESS, sample=_sample(1.0)),
    )
    assert outcome.result.sample is own
    assert outcome.result.status is RolloutStatus.FAILURE


def test_result_of_a_successful_workflow_is_the_grader_result_when_present() -> None:
    graded = ExecutionResult(status=RolloutStatus.SUCCESS, sample=_sample(0.5))
    outcome = ExecutionOutcome(
        workflow=ExecutionResult(status=RolloutStatus.SUCCESS, sample=_sample()),
        grader=graded,
    )
    assert outcome.result is graded
    alone = ExecutionOutcome(workflow=ExecutionResult(status=RolloutStatus.SUCCESS))
    assert alone.result is alone.workflow


def test_result_to_save_prefers_a_grader_result_that_has_a_sample() -> None:
    workflow = ExecutionResult(status=RolloutStatus.SUCCESS, sample=_sample())
    with_sample = ExecutionResult(status=RolloutStatus.FAILURE, sample=_sample())
    bare = ExecutionResult(status=RolloutStatus.FAILURE)
    assert ExecutionOutcome(workflow=workflow, grader=with_sample).result_to_save is with_sample
    assert ExecutionOutcome(workflow=workflow, grader=bare).result_to_save is workflow
    assert ExecutionOutcome(workflow=workflow).result_to_save is workflow
