"""Rollouts written in the official SDK's style, run unchanged: in process through
LocalBackend, and through our rollout server driven by our controller over loopback HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from integrations.support import (
    load_json,
    multiply_policy,
    rollout_context,
    serve_rollout_app,
    streamed_calls,
    truncated_policy,
    unknown_tool_policy,
)

from osmosis_rollout import (
    ExecutionRequest,
    RolloutErrorCategory,
    RolloutResultResponse,
    RolloutStatus,
)
from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.policy import ChatRequest, Faults
from osmosis_rollout.server import create_rollout_server
from osmosis_rollout.workspace.entrypoint import load_entrypoint

HERE = Path(__file__).parent / "official_style"
PROMPT = [{"role": "user", "content": "What is 6 times 7?"}]


def failing_policy(request: ChatRequest) -> Any:
    raise RuntimeError("the model backend crashed")


# entrypoint file, and a policy that makes that framework raise
ROLLOUTS = {
    "openai-agents": ("openai_multiply.py", unknown_tool_policy),
    "strands": ("strands_multiply.py", truncated_policy),
    "chat-client": ("chat_client_multiply.py", failing_policy),
}


@pytest.fixture(params=sorted(ROLLOUTS))
def rollout(request: pytest.FixtureRequest) -> tuple[Path, Callable[[ChatRequest], Any]]:
    filename, error_policy = ROLLOUTS[request.param]
    return HERE / filename, error_policy


@asynccontextmanager
async def rollout_server(entrypoint: Path, artifact_root: Path) -> AsyncIterator[RolloutClient]:
    loaded = load_entrypoint(str(entrypoint))
    assert loaded.found == "classes" and loaded.backend is not None
    app = create_rollout_server(
        backend=loaded.backend, artifact_root=artifact_root, configure_logging=False
    )
    async with serve_rollout_app(app) as url, RolloutClient(url) as client:
        yield client


async def run_over_http(
    entrypoint: Path,
    policy_server: PolicyServer,
    artifact_root: Path,
    *,
    rollout_id: str = "r1",
    agent_timeout_sec: float | None = 30.0,
) -> RolloutResultResponse:
    async with rollout_server(entrypoint, artifact_root) as client:
        handle = await client.run_rollout_async(
            initial_messages=PROMPT,
            chat_completions_url=policy_server.rollout_url(rollout_id),
            rollout_id=rollout_id,
            llm_api_key=policy_server.api_key,
            label="42",
            agent_timeout_sec=agent_timeout_sec,
        )
        return await handle


async def test_an_official_style_rollout_runs_unchanged_in_process(
    rollout: tuple[Path, Any], multiply_server: PolicyServer
) -> None:
    entrypoint, _ = rollout
    loaded = load_entrypoint(str(entrypoint))
    assert loaded.backend is not None

    with rollout_context(multiply_server, streaming=False):
        outcome = await loaded.backend.execute(
            ExecutionRequest(id="r1", prompt=PROMPT, label="42", agent_timeout_sec=30)
        )

    assert outcome.result.status is RolloutStatus.SUCCESS, outcome.result.err_message
    assert outcome.result.sample is not None and outcome.result.sample.reward == 1.0
    assert streamed_calls(multiply_server) == [False, False]


async def test_over_http_a_right_answer_reaches_reward_one_with_an_atif_trajectory(
    rollout: tuple[Path, Any], multiply_server: PolicyServer, tmp_path: Path
) -> None:
    entrypoint, _ = rollout

    result = await run_over_http(entrypoint, multiply_server, tmp_path)

    assert result.status is RolloutStatus.SUCCESS, result.err_message
    assert result.sample is not None and result.sample.reward == 1.0
    # The server builds the context; production endpoints are streaming-only.
    assert streamed_calls(multiply_server) == [True, True]

    document = load_json(tmp_path / "r1" / "trajectory.json")
    assert document["schema_version"] == "ATIF-v1.7"
    steps = document["steps"]
    sources = [step["source"] for step in steps]
    assert sources[0] == "user" and sources[-1] == "agent"
    tool_step = next(step for step in steps if step.get("tool_calls"))
    (call,) = tool_step["tool_calls"]
    assert call["function_name"] == "multiply" and call["arguments"] == {"a": 6, "b": 7}
    (observed,) = tool_step["observation"]["results"]
    assert observed["source_call_id"] == call["tool_call_id"] == "call_mul_1"
    assert "42" in str(observed["content"])
    assert "42" in str(steps[-1]["message"])
    assert document["extra"]["osmosis"]["reward"] == 1.0


async def test_over_http_a_wrong_answer_reaches_reward_zero(
    rollout: tuple[Path, Any], serve_policy: Callable[..., PolicyServer], tmp_path: Path
) -> None:
    entrypoint, _ = rollout
    server = serve_policy(multiply_policy(wrong=True))

    result = await run_over_http(entrypoint, server, tmp_path)

    assert result.status is RolloutStatus.SUCCESS, result.err_message
    assert result.sample is not None and result.sample.reward == 0.0


async def test_over_http_a_framework_exception_is_an_agent_error(
    rollout: tuple[Path, Any], serve_policy: Callable[..., PolicyServer], tmp_path: Path
) -> None:
    entrypoint, error_policy = rollout
    server = serve_policy(error_policy)

    result = await run_over_http(entrypoint, server, tmp_path)

    assert result.status is RolloutStatus.FAILURE
    assert result.err_category is RolloutErrorCategory.AGENT_ERROR, result.err_message


async def test_over_http_the_agent_deadline_is_a_timeout(
    rollout: tuple[Path, Any], serve_policy: Callable[..., PolicyServer], tmp_path: Path
) -> None:
    entrypoint, _ = rollout
    server = serve_policy(multiply_policy(), faults=Faults(latency_s=2.0))

    result = await run_over_http(entrypoint, server, tmp_path, agent_timeout_sec=0.3)

    assert result.status is RolloutStatus.FAILURE
    assert result.err_category is RolloutErrorCategory.TIMEOUT


async def test_a_server_told_never_to_stream_sends_plain_requests(
    rollout: tuple[Path, Any],
    multiply_server: PolicyServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entrypoint, _ = rollout
    monkeypatch.setenv("OSMOSIS_ROLLOUT_STREAMING", "never")

    result = await run_over_http(entrypoint, multiply_server, tmp_path)

    assert result.status is RolloutStatus.SUCCESS, result.err_message
    assert result.sample is not None and result.sample.reward == 1.0
    assert streamed_calls(multiply_server) == [False, False]
