"""The OpenAI Agents SDK integration, end to end against a real PolicyServer on loopback."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, ModelSettings, Runner, function_tool
from integrations.support import (
    multiply_policy,
    rollout_context,
    streamed_calls,
    unknown_tool_policy,
)

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    ExecutionRequest,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutErrorCategory,
    RolloutStatus,
)
from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.integrations.agents.openai_agents import (
    OsmosisAgent,
    OsmosisLitellmModel,
    OsmosisMemorySession,
    OsmosisRolloutModel,
)
from osmosis_rollout.policy import Faults

PROMPT = [{"role": "user", "content": "What is 6 times 7?"}]


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def multiply_agent(**model_kwargs: Any) -> Any:
    return OsmosisAgent(
        name="multiply-agent",
        instructions="Use the multiply tool when arithmetic is required.",
        model=OsmosisRolloutModel(**model_kwargs),
        model_settings=ModelSettings(temperature=1.0, max_tokens=4096),
        tools=[multiply],
    )


class MultiplyWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
        session = OsmosisMemorySession()
        await Runner.run(multiply_agent(), ctx.prompt, session=session)


def last_assistant_text(messages: Any) -> str:
    for item in reversed(list(messages)):
        if item.get("role") != "assistant":
            continue
        for block in item.get("content") or []:
            if isinstance(block, dict) and block.get("text"):
                return str(block["text"])
    return ""


class MultiplyGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        answer = last_assistant_text(ctx.sample.messages)
        ctx.set_reward(1.0 if ctx.label and ctx.label in answer else 0.0)


async def run_multiply(
    server: PolicyServer,
    *,
    streaming: bool | None = None,
    agent_timeout_sec: float | None = 30.0,
) -> Any:
    backend = LocalBackend(workflow=MultiplyWorkflow, grader=MultiplyGrader)
    with rollout_context(server, "r1", streaming=streaming):
        return await backend.execute(
            ExecutionRequest(
                id="r1", prompt=PROMPT, label="42", agent_timeout_sec=agent_timeout_sec
            )
        )


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "plain"])
async def test_multiply_workflow_reaches_reward_one(
    multiply_server: PolicyServer, streaming: bool
) -> None:
    outcome = await run_multiply(multiply_server, streaming=streaming)

    assert outcome.result.status is RolloutStatus.SUCCESS, outcome.result.err_message
    assert outcome.result.sample is not None
    assert outcome.result.sample.reward == 1.0
    assert streamed_calls(multiply_server) == [streaming, streaming]


async def test_the_default_is_to_stream_every_call(multiply_server: PolicyServer) -> None:
    outcome = await run_multiply(multiply_server)

    assert outcome.result.status is RolloutStatus.SUCCESS, outcome.result.err_message
    assert streamed_calls(multiply_server) == [True, True]


async def test_the_environment_overrides_the_context_hint(
    multiply_server: PolicyServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OSMOSIS_ROLLOUT_STREAMING", "always")

    outcome = await run_multiply(multiply_server, streaming=False)

    assert outcome.result.status is RolloutStatus.SUCCESS, outcome.result.err_message
    assert streamed_calls(multiply_server) == [True, True]


async def test_a_wrong_answer_reaches_reward_zero(
    serve_policy: Callable[..., PolicyServer],
) -> None:
    server = serve_policy(multiply_policy(wrong=True))

    outcome = await run_multiply(server)

    assert outcome.result.status is RolloutStatus.SUCCESS
    assert outcome.result.sample is not None
    assert outcome.result.sample.reward == 0.0


async def test_a_framework_exception_is_an_agent_error(
    serve_policy: Callable[..., PolicyServer],
) -> None:
    server = serve_policy(unknown_tool_policy)

    outcome = await run_multiply(server)

    assert outcome.result.status is RolloutStatus.FAILURE
    assert outcome.result.err_category is RolloutErrorCategory.AGENT_ERROR
    assert "divide" in (outcome.result.err_message or "")


async def test_the_agent_deadline_is_a_timeout(
    serve_policy: Callable[..., PolicyServer],
) -> None:
    server = serve_policy(multiply_policy(), faults=Faults(latency_s=2.0))

    outcome = await run_multiply(server, agent_timeout_sec=0.3)

    assert outcome.result.status is RolloutStatus.FAILURE
    assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT
    assert "workflow exceeded its 0.3s deadline" in (outcome.result.err_message or "")


def without_response_ids(items: Any) -> list[Any]:
    normalised = []
    for item in items:
        item = copy.deepcopy(dict(item))
        if "provider_data" in item:
            assert item["provider_data"].pop("response_id").startswith("chatcmpl-")
        normalised.append(item)
    return normalised


async def test_streamed_and_plain_rollouts_record_identical_samples(
    multiply_server: PolicyServer,
) -> None:
    streamed = await run_multiply(multiply_server, streaming=True)
    plain = await run_multiply(multiply_server, streaming=False)

    assert streamed.workflow.sample is not None and plain.workflow.sample is not None
    # The endpoint mints a fresh completion id per call; both paths record it.
    assert without_response_ids(streamed.workflow.sample.messages) == without_response_ids(
        plain.workflow.sample.messages
    )
    assert streamed.workflow.sample.trajectory_messages == plain.workflow.sample.trajectory_messages


async def test_sample_holds_session_items_and_a_chat_format_trajectory(
    multiply_server: PolicyServer,
) -> None:
    outcome = await run_multiply(multiply_server)

    sample = outcome.workflow.sample
    assert sample is not None
    items = list(sample.messages)
    assert items[0] == PROMPT[0]
    call = next(item for item in items if item.get("type") == "function_call")
    assert call["name"] == "multiply" and call["call_id"] == "call_mul_1"
    assert call["provider_data"]["model"] == "litellm_proxy/osmosis-rollout"
    output = next(item for item in items if item.get("type") == "function_call_output")
    assert output == {"call_id": "call_mul_1", "output": "42", "type": "function_call_output"}
    assert items[-1]["type"] == "message" and items[-1]["role"] == "assistant"
    # The agent's instructions are not part of the session.
    assert all(item.get("role") != "system" for item in items)

    chat = list(sample.trajectory_messages or [])
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "assistant"]
    assert chat[1]["tool_calls"][0]["function"]["name"] == "multiply"
    assert chat[2] == {"role": "tool", "tool_call_id": "call_mul_1", "content": "42"}
    assert chat[3]["content"] == "The product is 42."


async def test_requests_carry_the_rollout_model_tools_and_model_settings(
    multiply_server: PolicyServer,
) -> None:
    await run_multiply(multiply_server)

    first = multiply_server.log("r1").calls[0].request
    assert first["model"] == "osmosis-rollout"
    assert first["temperature"] == 1.0 and first["max_tokens"] == 4096
    assert first["messages"][0] == {
        "role": "system",
        "content": "Use the multiply tool when arithmetic is required.",
    }
    (tool,) = first["tools"]
    assert tool["type"] == "function" and tool["function"]["name"] == "multiply"
    assert tool["function"]["strict"] is True
    assert tool["function"]["parameters"]["additionalProperties"] is False
    second = multiply_server.log("r1").calls[1].request
    assert second["messages"][-1] == {"role": "tool", "tool_call_id": "call_mul_1", "content": "42"}


async def test_the_model_refuses_to_call_without_a_registered_session(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server):
        agent = multiply_agent()
        with pytest.raises(RuntimeError, match="OsmosisMemorySession"):
            await Runner.run(agent, PROMPT)

    assert multiply_server.log("r1").calls == []


@pytest.mark.parametrize("streaming", [True, False])
async def test_get_response_aggregates_a_subclass_stream_response_without_a_request(
    multiply_server: PolicyServer, streaming: bool
) -> None:
    # As on the official model (tests/interop compares them): the override answers, even in
    # plain-request mode and with no session registered, and nothing reaches the endpoint.
    from types import SimpleNamespace

    from openai.types.responses import ResponseOutputMessage, ResponseOutputText

    text = ResponseOutputText(type="output_text", text="canned", annotations=[])
    message = ResponseOutputMessage(
        id="m", type="message", role="assistant", status="completed", content=[text]
    )

    class Canned(OsmosisLitellmModel):  # type: ignore[misc]
        async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            yield SimpleNamespace(type="response.created")
            yield SimpleNamespace(
                type="response.completed", response=SimpleNamespace(output=[message], usage=None)
            )

    with rollout_context(multiply_server, streaming=streaming):
        response = await Canned().get_response("system", "hi")

    assert response.output == [message]
    assert multiply_server.log("r1").calls == []


async def test_a_second_session_in_one_rollout_raises_value_error(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server):
        OsmosisMemorySession()
        with pytest.raises(ValueError, match="already has a sample source"):
            OsmosisMemorySession()


async def test_a_session_used_in_a_rollout_it_was_not_registered_with_raises(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server, "r1"):
        session = OsmosisMemorySession()
    with rollout_context(multiply_server, "r2"):
        with pytest.raises(RuntimeError, match="not registered"):
            await session.get_items()
        with pytest.raises(RuntimeError, match="not registered"):
            await session.add_items([{"role": "user", "content": "hi"}])


async def test_a_session_outside_any_rollout_is_a_plain_session() -> None:
    session = OsmosisMemorySession()
    await session.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])

    assert await session.get_items(limit=1) == [{"role": "user", "content": "b"}]
    assert await session.pop_item() == {"role": "user", "content": "b"}
    await session.clear_session()
    assert await session.get_items() == []


async def test_the_placeholder_used_directly_raises_not_implemented() -> None:
    placeholder = OsmosisRolloutModel()
    agent = Agent(name="raw", model=placeholder)

    with pytest.raises(NotImplementedError, match="placeholder"):
        await Runner.run(agent, "hi")
    with pytest.raises(NotImplementedError, match="placeholder"):
        async for _ in placeholder.stream_response():
            pass


def test_the_bound_model_needs_an_active_rollout_context() -> None:
    with pytest.raises(RuntimeError, match="active RolloutContext"):
        OsmosisAgent(name="a", model=OsmosisRolloutModel())


async def test_the_placeholder_becomes_a_model_bound_to_the_context(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server, "r7"):
        agent = OsmosisAgent(name="a", model=OsmosisRolloutModel(streaming=False))

    assert isinstance(agent.model, OsmosisLitellmModel)
    assert agent.model.base_url == multiply_server.rollout_url("r7")
    assert agent.model.api_key == multiply_server.api_key
    assert agent.model.model == "litellm_proxy/osmosis-rollout"
    assert agent.model.streaming is False


def test_other_models_pass_through_and_register_nothing() -> None:
    agent = OsmosisAgent(name="a", model="gpt-4o-mini")

    assert agent.model == "gpt-4o-mini"


async def test_run_streamed_streams_the_reply_events(multiply_server: PolicyServer) -> None:
    with rollout_context(multiply_server, streaming=False) as ctx:
        session = OsmosisMemorySession()
        result = Runner.run_streamed(multiply_agent(), PROMPT, session=session)
        kinds = {event.type async for event in result.stream_events()}
        sample = await ctx.get_sample()

    assert "raw_response_event" in kinds
    assert streamed_calls(multiply_server) == [True, True]
    assert sample is not None
    assert last_assistant_text(sample.messages) == "The product is 42."


async def test_a_preview_is_an_isolated_copy_of_the_latest_items(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server) as ctx:
        session = OsmosisMemorySession()
        await Runner.run(multiply_agent(), PROMPT, session=session)
        assert ctx.sample_source is not None
        preview = await ctx.sample_source.get_preview(2)

    assert preview is not None
    assert len(preview.messages) == 2
    assert preview.extra_fields == {"_preview_truncated": True, "_preview_turn": 2}
    preview.messages[-1]["role"] = "changed"  # type: ignore[index]
    assert session.items[-1]["role"] == "assistant"
