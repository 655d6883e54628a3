"""execute_in_process: the one in-process path; user code's BaseExceptions fail only its rollout."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    ExecutionRequest,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutContext,
    RolloutErrorCategory,
    RolloutStatus,
)
from osmosis_rollout.execution import execute_in_process

PROMPT = [{"role": "user", "content": "hi"}]


class Echo(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        return [*ctx.prompt, {"role": "assistant", "content": "hello"}]


class Exits(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
        sys.exit(3)


class Interrupted(AgentWorkflow[Any]):
    def run(self, ctx: AgentWorkflowContext[Any]) -> None:
        raise KeyboardInterrupt


class Rewards(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(0.5)


class ExitingGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        raise SystemExit("bye")


class NanGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        ctx.set_reward(float("nan"))


def _run(
    workflow: type[AgentWorkflow[Any]],
    grader: type[Grader] | None = Rewards,
    root: Path | None = None,
) -> Any:
    backend = LocalBackend(workflow=workflow, grader=grader)
    request = ExecutionRequest(id="r-1", prompt=PROMPT, label="x")
    return asyncio.run(
        execute_in_process(backend, request, RolloutContext(rollout_id="r-1"), trajectory_root=root)
    )


def test_a_finished_rollout_returns_its_result_and_saved_trajectory(tmp_path: Path) -> None:
    executed = _run(Echo, root=tmp_path)
    assert executed.result.status is RolloutStatus.SUCCESS
    assert executed.result.sample.reward == 0.5
    assert executed.trajectory == tmp_path / "r-1" / "trajectory.json"
    assert executed.trajectory.is_file()
    assert executed.phase is None


class LongTalk(AgentWorkflow[Any]):
    """Past the bound for writing on the loop: 100 messages of 2,000 characters, parts too."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        turns = [
            {"role": "assistant" if i % 2 else "user", "content": f"{i:04d}" + "x" * 1996}
            for i in range(99)
        ]
        parts = {"role": "user", "content": [{"type": "text", "text": "the last part"}]}
        return [*ctx.prompt, *turns, parts]


@pytest.mark.parametrize("workflow", [Echo, LongTalk], ids=["small", "large"])
def test_small_and_large_trajectories_are_saved_whole(
    tmp_path: Path, workflow: type[AgentWorkflow[Any]]
) -> None:
    executed = _run(workflow, root=tmp_path)
    document = json.loads(executed.trajectory.read_text(encoding="utf-8"))
    sample = executed.result.sample
    assert len(document["steps"]) == len(sample.messages)
    assert [p.name for p in (tmp_path / "r-1").iterdir() if p.name.endswith(".tmp")] == []


def test_without_a_trajectory_root_nothing_is_saved(tmp_path: Path) -> None:
    executed = _run(Echo)
    assert executed.trajectory is None


@pytest.mark.parametrize(
    ("workflow", "message"),
    [
        (Exits, "SystemExit: 3 raised by the workflow"),
        (Interrupted, "KeyboardInterrupt raised by the workflow"),
    ],
)
def test_a_workflow_raising_a_base_exception_fails_only_its_rollout(
    workflow: type[AgentWorkflow[Any]], message: str
) -> None:
    executed = _run(workflow)
    assert executed.result.status is RolloutStatus.FAILURE
    assert executed.result.err_message == message
    assert executed.result.err_category is RolloutErrorCategory.AGENT_ERROR
    assert executed.phase == "workflow"


def test_a_grader_raising_system_exit_is_blamed_on_the_grader() -> None:
    executed = _run(Echo, ExitingGrader)
    assert executed.result.err_message == "SystemExit: bye raised by the grader"
    assert executed.phase == "grader"


def test_a_non_finite_reward_names_the_value_the_grader_set() -> None:
    executed = _run(Echo, NanGrader)
    assert executed.result.err_category is RolloutErrorCategory.VALIDATION_ERROR
    assert executed.result.err_message.startswith("the grader set reward=nan;")
    assert executed.phase == "grader"


def test_cancellation_still_propagates() -> None:
    class Forever(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
            await asyncio.sleep(60)

    async def main() -> None:
        backend = LocalBackend(workflow=Forever)
        request = ExecutionRequest(id="r-1", prompt=PROMPT)
        task = asyncio.ensure_future(
            execute_in_process(backend, request, RolloutContext(rollout_id="r-1"))
        )
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


LATE_SECRET = "late-secret-0123456789"


class SaysTheLateSecret(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        return [*ctx.prompt, {"role": "assistant", "content": f"the key is {LATE_SECRET}"}]


def test_a_secret_put_into_the_environment_mid_run_is_redacted_from_later_trajectories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LATE_API_KEY", raising=False)

    async def main() -> list[str]:
        backend = LocalBackend(workflow=SaysTheLateSecret, grader=Rewards)
        texts = []
        for i in range(3):
            if i == 1:
                monkeypatch.setenv("LATE_API_KEY", LATE_SECRET)
            request = ExecutionRequest(id=f"r-{i}", prompt=PROMPT, label="x")
            context = RolloutContext(rollout_id=f"r-{i}", api_key="policy-key-abcdefgh")
            executed = await execute_in_process(backend, request, context, trajectory_root=tmp_path)
            assert executed.trajectory is not None
            texts.append(executed.trajectory.read_text(encoding="utf-8"))
        return texts

    before, after, again = asyncio.run(main())
    assert LATE_SECRET in before  # not a secret yet when the first rollout was saved
    for text in (after, again):
        assert LATE_SECRET not in text
        assert "[REDACTED:LATE_API_KEY]" in text


class Raises(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
        raise RuntimeError("boom")


def test_the_executed_rollout_names_its_diagnostics_only_when_they_were_saved(
    tmp_path: Path,
) -> None:
    passed = _run(Echo, root=tmp_path / "ok")
    assert passed.diagnostics is None
    assert not (tmp_path / "ok" / "r-1" / "diagnostics.json").exists()
    failed = _run(Raises, root=tmp_path / "failed")
    assert failed.diagnostics == tmp_path / "failed" / "r-1" / "diagnostics.json"
    assert json.loads(failed.diagnostics.read_text())["exception_type"] == "RuntimeError"
