"""RolloutContext (env fallback, contextvar, sample source), phase contexts, live status."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    ExecutionRequest,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutContext,
    RolloutSample,
    RolloutStatus,
    SampleSource,
    get_rollout_context,
)
from osmosis_rollout.context import RolloutProgress

ENV = {
    "OSMOSIS_CHAT_COMPLETIONS_URL": "http://127.0.0.1:9/v1/rollouts/env",
    "OSMOSIS_API_KEY": "env-key",
    "OSMOSIS_ROLLOUT_ID": "env-rollout",
}


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


class FixedSource(SampleSource):
    def __init__(self, content: str = "from source") -> None:
        self.content = content

    async def get_sample(self) -> RolloutSample:
        return RolloutSample(messages=[{"role": "assistant", "content": self.content}])


def test_a_rollout_context_defaults_to_empty_values(no_env: None) -> None:
    ctx = RolloutContext()
    assert ctx.chat_completions_url == ""
    assert ctx.api_key is None
    assert ctx.rollout_id == ""
    assert ctx.sample_source is None and ctx.progress is None
    assert ctx.preview_enabled is True


def test_empty_fields_fall_back_to_the_environment(env: None) -> None:
    ctx = RolloutContext()
    assert ctx.chat_completions_url == ENV["OSMOSIS_CHAT_COMPLETIONS_URL"]
    assert ctx.api_key == "env-key"
    assert ctx.rollout_id == "env-rollout"


def test_explicit_values_override_the_environment(env: None) -> None:
    ctx = RolloutContext(chat_completions_url="http://x/v1", api_key="k", rollout_id="r")
    assert (ctx.chat_completions_url, ctx.api_key, ctx.rollout_id) == ("http://x/v1", "k", "r")


def test_an_empty_api_key_also_falls_back_to_the_environment(env: None) -> None:
    assert RolloutContext(api_key="").api_key == "env-key"


def test_entering_makes_the_context_current_and_leaving_clears_it(no_env: None) -> None:
    assert get_rollout_context() is None
    with RolloutContext(rollout_id="r") as ctx:
        assert get_rollout_context() is ctx
    assert get_rollout_context() is None


def test_leaving_a_nested_context_clears_rather_than_restores_the_outer(no_env: None) -> None:
    # As in the official SDK: exit sets the variable to None; it does not reset a token.
    with RolloutContext(rollout_id="outer"):
        with RolloutContext(rollout_id="inner"):
            pass
        assert get_rollout_context() is None


def test_a_context_entered_in_a_copied_context_does_not_leak_out(no_env: None) -> None:
    def enter() -> RolloutContext | None:
        RolloutContext(rollout_id="inside").__enter__()
        return get_rollout_context()

    inside = contextvars.copy_context().run(enter)
    assert inside is not None and inside.rollout_id == "inside"
    assert get_rollout_context() is None


async def test_a_registered_sample_source_provides_the_sample(no_env: None) -> None:
    ctx = RolloutContext()
    ctx.set_sample_source(FixedSource())
    sample = await ctx.get_sample()
    assert sample is not None and sample.messages[0]["content"] == "from source"


async def test_get_sample_without_a_source_returns_none(no_env: None) -> None:
    assert await RolloutContext().get_sample() is None


def test_a_second_sample_source_is_rejected(no_env: None) -> None:
    ctx = RolloutContext()
    first = FixedSource("first")
    ctx.set_sample_source(first)
    with pytest.raises(ValueError, match="already has a sample source registered"):
        ctx.set_sample_source(FixedSource("second"))
    assert ctx.sample_source is first


async def test_a_sample_source_has_no_preview_unless_it_opts_in() -> None:
    assert await FixedSource().get_preview(5) is None


def test_grader_context_carries_the_sample_and_label() -> None:
    sample = RolloutSample(messages=[{"role": "assistant", "content": "a"}])
    ctx = GraderContext(label="a", sample=sample)
    assert ctx.sample is sample and ctx.label == "a"
    ctx.set_reward(1)
    assert sample.reward == 1.0


def test_phase_contexts_default_metadata_to_none() -> None:
    assert GraderContext().metadata is None
    assert AgentWorkflowContext(prompt=[]).metadata is None


def test_phase_contexts_carry_metadata() -> None:
    assert GraderContext(metadata={"k": 1}).metadata == {"k": 1}
    assert AgentWorkflowContext(prompt=[], metadata={"k": 1}).metadata == {"k": 1}


def test_workflow_context_construction_and_config() -> None:
    prompt = [{"role": "user", "content": "hi"}]
    basic: AgentWorkflowContext[AgentWorkflowConfig] = AgentWorkflowContext(prompt=prompt)
    assert basic.prompt is prompt and basic.config is None and basic.artifacts_dir is None
    config = AgentWorkflowConfig.model_validate({"name": "c", "temperature": 0.2})
    with_config = AgentWorkflowContext(prompt=prompt, config=config)
    assert with_config.config is config
    assert with_config.config.model_extra == {"temperature": 0.2}


async def test_progress_starts_queued_and_notifies_a_listener_of_each_change() -> None:
    seen: list[RolloutStatus] = []
    assert RolloutProgress().status is RolloutStatus.QUEUED
    progress = RolloutProgress(on_status=seen.append)
    await progress.set_status(RolloutStatus.RUNNING)
    await progress.set_status(RolloutStatus.RUNNING)  # unchanged: ignored
    await progress.set_status(RolloutStatus.SUCCESS)
    await progress.set_status(RolloutStatus.GRADING)  # after a terminal status: ignored
    assert seen == [RolloutStatus.RUNNING, RolloutStatus.SUCCESS]
    assert progress.status is RolloutStatus.SUCCESS


async def test_a_failing_status_listener_is_logged_and_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def explode(status: RolloutStatus) -> None:
        raise RuntimeError("listener bug")

    progress = RolloutProgress(on_status=explode)
    await progress.set_status(RolloutStatus.RUNNING)
    assert progress.status is RolloutStatus.RUNNING
    assert "observer failed" in caplog.text


async def test_a_waiter_wakes_on_a_status_change() -> None:
    progress = RolloutProgress()
    waiter = asyncio.create_task(progress.wait_for_change(timeout=5))
    await asyncio.sleep(0)
    await progress.set_status(RolloutStatus.RUNNING)
    assert await waiter is RolloutStatus.RUNNING


async def test_waiting_on_a_finished_rollout_returns_at_once() -> None:
    progress = RolloutProgress(status=RolloutStatus.FAILURE)
    assert await progress.wait_for_change(timeout=5) is RolloutStatus.FAILURE


async def test_waiting_gives_up_after_its_timeout_with_the_current_status() -> None:
    assert await RolloutProgress().wait_for_change(timeout=0.01) is RolloutStatus.QUEUED


async def test_a_rollout_reports_queued_then_running_then_grading(no_env: None) -> None:
    release = asyncio.Event()
    status_during_run: list[RolloutStatus] = []

    def _progress() -> RolloutProgress:
        rollout = get_rollout_context()
        assert rollout is not None and rollout.progress is not None
        return rollout.progress

    class Waits(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            status_during_run.append(_progress().status)
            await asyncio.wait_for(release.wait(), 5)
            return [{"role": "assistant", "content": "a"}]

    class Records(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            ctx.set_reward(1.0)

    backend = LocalBackend(workflow=Waits, grader=Records)  # four slots
    seen: dict[str, list[RolloutStatus]] = {}
    progresses: dict[str, RolloutProgress] = {}

    async def run(rollout_id: str) -> None:
        progress = RolloutProgress(on_status=seen.setdefault(rollout_id, []).append)
        progresses[rollout_id] = progress
        with RolloutContext(rollout_id=rollout_id, progress=progress):
            outcome = await backend.execute(ExecutionRequest(id=rollout_id, prompt=[], label="a"))
        assert outcome.result.status is RolloutStatus.SUCCESS

    tasks = [asyncio.create_task(run(f"p-{i}")) for i in range(5)]
    async with asyncio.timeout(5):
        while backend.limiter.queued < 1 or backend.limiter.running < 4:
            await asyncio.sleep(0.001)
    # Four rollouts hold the slots and read running; the fifth waits and still reads queued.
    statuses = sorted(p.status for p in progresses.values())
    assert statuses == sorted([RolloutStatus.RUNNING] * 4 + [RolloutStatus.QUEUED])
    release.set()
    await asyncio.gather(*tasks)
    assert seen == {f"p-{i}": [RolloutStatus.RUNNING, RolloutStatus.GRADING] for i in range(5)}
    # The terminal status is the server's to set; the backend leaves it at grading.
    assert {p.status for p in progresses.values()} == {RolloutStatus.GRADING}
    assert status_during_run == [RolloutStatus.RUNNING] * 5


async def test_no_grading_status_when_the_grader_does_not_run(no_env: None) -> None:
    class Answers(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
            return [{"role": "assistant", "content": "a"}]

    class Never(Grader):
        async def grade(self, ctx: GraderContext) -> None:
            raise AssertionError("must not run")

    backend = LocalBackend(workflow=Answers, grader=Never)
    for request in (
        ExecutionRequest(id="g-1", prompt=[], label="a", grade=False),
        ExecutionRequest(id="g-2", prompt=[]),  # neither label nor metadata
    ):
        seen: list[RolloutStatus] = []
        with RolloutContext(rollout_id=request.id, progress=RolloutProgress(on_status=seen.append)):
            await backend.execute(request)
        assert seen == [RolloutStatus.RUNNING]


async def test_the_workflow_runs_inside_the_ambient_rollout_context(no_env: None) -> None:
    seen: list[RolloutContext | None] = []

    class LooksUp(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            seen.append(get_rollout_context())

    ambient = RolloutContext(chat_completions_url="http://127.0.0.1:9/v1", rollout_id="amb")
    with ambient:
        await LocalBackend(workflow=LooksUp).execute(ExecutionRequest(id="amb", prompt=[]))
    assert seen == [ambient]


async def test_without_an_ambient_context_the_workflow_gets_one_for_its_rollout(
    env: None,
) -> None:
    seen: list[RolloutContext | None] = []

    class LooksUp(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            seen.append(get_rollout_context())

    await LocalBackend(workflow=LooksUp).execute(ExecutionRequest(id="own-id", prompt=[]))
    (ctx,) = seen
    assert ctx is not None
    assert ctx.rollout_id == "own-id"
    assert ctx.chat_completions_url == ENV["OSMOSIS_CHAT_COMPLETIONS_URL"]
    assert get_rollout_context() is None


async def test_the_official_wait_for_status_change_name_also_wakes_on_a_change() -> None:
    progress = RolloutProgress()
    waiter = asyncio.create_task(progress.wait_for_status_change())
    await asyncio.sleep(0)
    await progress.set_status(RolloutStatus.GRADING)
    assert await asyncio.wait_for(waiter, 5) is RolloutStatus.GRADING
