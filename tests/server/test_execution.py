"""Execution through the server: status progression, failures, key threading, trajectories."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from server_support import (
    FAST,
    EchoWorkflow,
    Gate,
    GatedWorkflow,
    admit,
    eventually,
    lease,
    make_app,
    poll_until_terminal,
    serving,
    until_running,
)

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowConfig,
    AgentWorkflowContext,
    ConcurrencyConfig,
    ExecutionBackend,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    Grader,
    GraderContext,
    RolloutStatus,
    get_rollout_context,
)
from osmosis_rollout.server import create_rollout_server

# -- status progression ------------------------------------------------------------------


async def test_server_marks_running_while_the_backend_still_waits_for_a_slot() -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        workflow_config=AgentWorkflowConfig(
            name="one", concurrency=ConcurrencyConfig(max_concurrent=1)
        ),
    )
    async with serving(app) as client:
        await admit(client, "first", metadata={"gate": "g"}, grade=False)
        await admit(client, "second", metadata={"gate": "g"}, grade=False)
        await until_running(app, "second")
        backend = app.state.osmosis_backend
        waiting = backend.limiter.queued
        Gate.get("g").set()
    assert waiting == 1


class SlowGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        await Gate.get("grade").wait()
        ctx.set_reward(0.5)


async def test_grading_is_visible_while_the_grader_runs() -> None:
    app = make_app(workflow=EchoWorkflow, grader=SlowGrader)
    async with serving(app) as client:
        token = await admit(client, "r-1")
        registry = app.state.osmosis_server.registry
        await eventually(lambda: registry.entries["r-1"].progress.status == "grading")
        body = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
        Gate.get("grade").set()
        final = await poll_until_terminal(client, "r-1", token)
    assert body["status"] == "grading"
    assert final["sample"]["reward"] == 0.5


async def test_status_observer_sees_every_change_in_order() -> None:
    seen: list[tuple[str, str]] = []
    app = make_app(on_status=lambda rid, status: seen.append((rid, str(status))))
    async with serving(app) as client:
        token = await admit(client, "r-1")
        await poll_until_terminal(client, "r-1", token)
    assert seen == [
        ("r-1", "queued"),
        ("r-1", "running"),
        ("r-1", "grading"),
        ("r-1", "success"),
    ]


async def test_a_failing_status_observer_never_breaks_a_rollout() -> None:
    def explode(rid: str, status: RolloutStatus) -> None:
        raise RuntimeError("observer bug")

    async with serving(make_app(on_status=explode)) as client:
        token = await admit(client, "r-1")
        result = await poll_until_terminal(client, "r-1", token)
    assert result["status"] == "success"


# -- outcomes ------------------------------------------------------------------------------


async def test_workflow_and_grader_success_carries_the_reward() -> None:
    async with serving(make_app()) as client:
        token = await admit(client, "r-1")
        result = await poll_until_terminal(client, "r-1", token)
    assert result["status"] == "success"
    assert result["sample"]["reward"] == 1.0
    assert result["sample"]["label"] == "cba"


async def test_grade_false_skips_grading() -> None:
    async with serving(make_app()) as client:
        token = await admit(client, "r-1", grade=False)
        result = await poll_until_terminal(client, "r-1", token)
    assert result["status"] == "success"
    assert result["sample"]["reward"] is None


async def test_no_grader_is_a_bare_failure() -> None:
    async with serving(make_app(grader=None)) as client:
        token = await admit(client, "r-1")
        result = await poll_until_terminal(client, "r-1", token)
    assert (result["status"], result["err_message"], result["err_category"]) == (
        "failure",
        None,
        None,
    )


class RaisingBackend(ExecutionBackend):
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "message", "category"),
    [
        (KeyError("k"), "'k'", "agent_error"),
        (ValueError("bad value"), "bad value", "validation_error"),
        (TimeoutError(), "Internal server error", "timeout"),
        (RuntimeError(""), "Internal server error", "agent_error"),
    ],
)
async def test_execute_raising_is_a_categorized_failure(
    exc: Exception, message: str, category: str, _artifact_root: Path
) -> None:
    app = create_rollout_server(backend=RaisingBackend(exc), **FAST)
    async with serving(app) as client:
        token = await admit(client, "r-1")
        result = await poll_until_terminal(client, "r-1", token)
    assert result["status"] == "failure"
    assert result["err_message"] == message
    assert result["err_category"] == category
    assert not (_artifact_root / "r-1").exists()


class Doom(BaseException):
    """Not an Exception, like SystemExit: it must fail its rollout, not the server's loop."""


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        (Doom("boom"), "Doom: boom raised by the workflow"),
        (SystemExit(3), "SystemExit: 3 raised by the workflow"),
        (KeyboardInterrupt(), "KeyboardInterrupt raised by the workflow"),
    ],
)
async def test_execute_raising_a_base_exception_fails_only_that_rollout(
    exc: BaseException, message: str
) -> None:
    app = create_rollout_server(backend=RaisingBackend(exc), **FAST)
    async with serving(app) as client:
        token = await admit(client, "r-1")
        result = await poll_until_terminal(client, "r-1", token, notes=True)
        official_view = await poll_until_terminal(client, "r-1", token)
        health = await client.get("/health")
    notes = result.pop("notes")
    assert official_view == result  # without the header: the official result, key for key
    assert result == {
        "rollout_id": "r-1",
        "status": "failure",
        "sample": None,
        "err_message": message,
        "err_category": "agent_error",
    }
    # Beyond the official result: where in the (here: the test's) code it was raised.
    assert notes["phase"] == "workflow"
    assert notes["where"].endswith("in execute")
    assert health.status_code == 200


# -- keys & metadata threading -------------------------------------------------------------


class ContextProbe(AgentWorkflow[Any]):
    """Records what the ambient RolloutContext says."""

    seen: dict[str, Any] = {}

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        rollout = get_rollout_context()
        assert rollout is not None
        ContextProbe.seen = {
            "url": rollout.chat_completions_url,
            "api_key": rollout.api_key,
            "rollout_id": rollout.rollout_id,
            "has_progress": rollout.progress is not None,
            "metadata": ctx.metadata,
            "prompt": ctx.prompt,
        }
        return [{"role": "assistant", "content": "ok"}]


class MetadataGrader(Grader):
    seen: Any = "unset"

    async def grade(self, ctx: GraderContext) -> None:
        MetadataGrader.seen = ctx.metadata
        ctx.set_reward(1.0)


async def test_llm_api_key_url_and_id_reach_the_rollout_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OSMOSIS_API_KEY", "from-env")
    async with serving(make_app(workflow=ContextProbe)) as client:
        token = await admit(
            client, "r-1", llm_api_key="sk-rollout", chat_completions_url="http://policy/v1/r-1"
        )
        await poll_until_terminal(client, "r-1", token)
    assert ContextProbe.seen["api_key"] == "sk-rollout"
    assert ContextProbe.seen["url"] == "http://policy/v1/r-1"
    assert ContextProbe.seen["rollout_id"] == "r-1"
    assert ContextProbe.seen["has_progress"]


async def test_null_llm_api_key_and_empty_url_fall_back_to_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OSMOSIS_API_KEY", "from-env")
    monkeypatch.setenv("OSMOSIS_CHAT_COMPLETIONS_URL", "http://env-policy/v1")
    async with serving(make_app(workflow=ContextProbe)) as client:
        token = await admit(client, "r-1", llm_api_key=None, chat_completions_url="")
        await poll_until_terminal(client, "r-1", token)
    assert ContextProbe.seen["api_key"] == "from-env"
    assert ContextProbe.seen["url"] == "http://env-policy/v1"


@pytest.mark.parametrize("metadata", [{"difficulty": 3, "tags": ["a"]}, None])
async def test_metadata_and_prompt_are_threaded_unchanged(metadata: Any) -> None:
    prompt = [
        {"role": "system", "content": "s", "extra": {"k": 1}},
        {"role": "user", "content": "u"},
    ]
    app = make_app(workflow=ContextProbe, grader=MetadataGrader)
    MetadataGrader.seen = "unset"
    async with serving(app) as client:
        token = await admit(client, "r-1", metadata=metadata, initial_messages=prompt)
        await poll_until_terminal(client, "r-1", token)
    assert ContextProbe.seen["metadata"] == metadata
    assert ContextProbe.seen["prompt"] == prompt
    assert MetadataGrader.seen == metadata


async def test_agent_timeout_reaches_the_backend() -> None:
    async with serving(make_app(workflow=GatedWorkflow, grader=None)) as client:
        token = await admit(client, "r-1", metadata={"gate": "never"}, agent_timeout_sec=0.05)
        result = await poll_until_terminal(client, "r-1", token)
    assert result["err_category"] == "timeout"
    assert "deadline" in result["err_message"]


# -- trajectory persistence ------------------------------------------------------------------


async def test_trajectory_is_written_before_the_result_is_visible(_artifact_root: Path) -> None:
    seen_at_finish: list[bool] = []
    path = _artifact_root / "r-1" / "trajectory.json"

    def observer(rid: str, status: RolloutStatus) -> None:
        if status.is_terminal:
            seen_at_finish.append(path.exists())

    async with serving(make_app(on_status=observer)) as client:
        token = await admit(client, "r-1", extra_fields={"row_index": 7})
        result = await poll_until_terminal(client, "r-1", token)
    assert result["status"] == "success"
    assert seen_at_finish == [True]
    document = json.loads(path.read_text())
    assert document["session_id"] == "r-1"
    assert document["extra"]["osmosis"]["reward"] == 1.0
    assert document["extra"]["osmosis"]["request_extra_fields"] == {"row_index": 7}


async def test_artifact_root_override_redirects_trajectories(
    tmp_path: Path, _artifact_root: Path
) -> None:
    root = tmp_path / "elsewhere"
    async with serving(make_app(artifact_root=root)) as client:
        token = await admit(client, "r-1")
        await poll_until_terminal(client, "r-1", token)
    assert (root / "r-1" / "trajectory.json").is_file()
    assert not (_artifact_root / "r-1" / "trajectory.json").exists()


class DiagnosticBackend(ExecutionBackend):
    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        return ExecutionOutcome(
            workflow=ExecutionResult(
                status=RolloutStatus.FAILURE,
                err_message="tool broke",
                err_category="agent_error",
                extra_fields={"phase": "workflow", "stderr": "trace"},
            )
        )


async def test_a_sample_less_failure_leaves_diagnostics_only(_artifact_root: Path) -> None:
    app = create_rollout_server(backend=DiagnosticBackend(), **FAST)
    async with serving(app) as client:
        token = await admit(client, "r-1")
        result = await poll_until_terminal(client, "r-1", token)
    assert result["err_message"] == "tool broke"
    assert "stderr" not in json.dumps(result)  # diagnostics never reach the wire
    assert (
        json.loads((_artifact_root / "r-1" / "diagnostics.json").read_text())["stderr"] == "trace"
    )
    assert not (_artifact_root / "r-1" / "trajectory.json").exists()


async def test_a_lease_expired_rollout_writes_no_trajectory(_artifact_root: Path) -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        result_wait_timeout_sec=0.05,
        polling_lease_timeout_sec=0.1,
    )
    async with serving(app) as client:
        await admit(client, "r-1", metadata={"gate": "never"})
        registry = app.state.osmosis_server.registry
        entry = registry.entries["r-1"]
        await eventually(lambda: entry.finished)
        await asyncio.wait({entry.task}, timeout=5)
    assert not (_artifact_root / "r-1" / "trajectory.json").exists()
