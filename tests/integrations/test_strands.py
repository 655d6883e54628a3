"""The Strands Agents integration, end to end against a real PolicyServer on loopback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import litellm
import pytest
from integrations.support import (
    multiply_policy,
    rollout_context,
    streamed_calls,
    truncated_policy,
)
from strands import Agent, tool
from strands.models.litellm import LiteLLMModel

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
from osmosis_rollout.integrations.agents.strands import (
    OsmosisRolloutModel,
    OsmosisStrandsAgent,
)
from osmosis_rollout.policy import Faults

PROMPT = [{"role": "user", "content": "What is 6 times 7?"}]
SYSTEM = "Use the multiply tool when arithmetic is required."


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def multiply_agent(prompt: list[dict[str, Any]] | None = None, **model_kwargs: Any) -> Any:
    model_kwargs.setdefault("params", {"temperature": 1.0, "max_tokens": 4096})
    return OsmosisStrandsAgent(
        model=OsmosisRolloutModel(**model_kwargs),
        messages=prompt,
        tools=[multiply],
        system_prompt=SYSTEM,
        callback_handler=None,
    )


class MultiplyWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
        agent = multiply_agent(ctx.prompt[:-1])
        await agent.invoke_async(ctx.prompt[-1]["content"])


def last_assistant_text(messages: Any) -> str:
    for message in reversed(list(messages)):
        if message.get("role") != "assistant":
            continue
        for block in message.get("content") or []:
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


def comparable(messages: Any) -> list[dict[str, Any]]:
    """Strands messages without their random tracking ids and timing metrics."""
    return [{k: v for k, v in m.items() if k not in ("tracking_id", "metadata")} for m in messages]


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
    first = multiply_server.log("r1").calls[0].request
    assert first["stream_options"] == {"include_usage": True}


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
    server = serve_policy(truncated_policy)

    outcome = await run_multiply(server)

    assert outcome.result.status is RolloutStatus.FAILURE
    assert outcome.result.err_category is RolloutErrorCategory.AGENT_ERROR
    assert outcome.result.extra_fields is not None
    assert outcome.result.extra_fields["exception_type"] == "MaxTokensReachedException"


async def test_the_agent_deadline_is_a_timeout(
    serve_policy: Callable[..., PolicyServer],
) -> None:
    server = serve_policy(multiply_policy(), faults=Faults(latency_s=2.0))

    outcome = await run_multiply(server, agent_timeout_sec=0.3)

    assert outcome.result.status is RolloutStatus.FAILURE
    assert outcome.result.err_category is RolloutErrorCategory.TIMEOUT


async def test_streamed_and_plain_rollouts_record_identical_samples(
    multiply_server: PolicyServer,
) -> None:
    streamed = await run_multiply(multiply_server, streaming=True)
    plain = await run_multiply(multiply_server, streaming=False)

    assert streamed.workflow.sample is not None and plain.workflow.sample is not None
    assert comparable(streamed.workflow.sample.messages) == comparable(
        plain.workflow.sample.messages
    )
    assert streamed.workflow.sample.trajectory_messages == plain.workflow.sample.trajectory_messages


async def test_sample_holds_agent_messages_and_a_chat_format_trajectory(
    multiply_server: PolicyServer,
) -> None:
    outcome = await run_multiply(multiply_server)

    sample = outcome.workflow.sample
    assert sample is not None
    messages = comparable(sample.messages)
    assert messages == [
        {"role": "user", "content": [{"text": "What is 6 times 7?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": "call_mul_1",
                        "name": "multiply",
                        "input": {"a": 6, "b": 7},
                    }
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "call_mul_1",
                        "status": "success",
                        "content": [{"text": "42"}],
                    }
                }
            ],
        },
        {"role": "assistant", "content": [{"text": "The product is 42."}]},
    ]
    chat = list(sample.trajectory_messages or [])
    assert [m["role"] for m in chat] == ["user", "assistant", "tool", "assistant"]
    assert chat[0]["content"] == [{"text": "What is 6 times 7?", "type": "text"}]
    assert chat[1]["tool_calls"][0]["function"]["name"] == "multiply"
    assert chat[2]["tool_call_id"] == "call_mul_1"


async def test_placeholder_params_and_the_system_prompt_reach_the_endpoint(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server):
        agent = multiply_agent(params={"temperature": 0.25, "max_tokens": 77, "top_p": 0.5})
        await agent.invoke_async("What is 6 times 7?")

    first = multiply_server.log("r1").calls[0].request
    assert first["model"] == "osmosis-rollout"
    assert (first["temperature"], first["max_tokens"], first["top_p"]) == (0.25, 77, 0.5)
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][0]["content"] == [{"type": "text", "text": SYSTEM}]
    (spec,) = first["tools"]
    assert spec["function"]["name"] == "multiply"
    second = multiply_server.log("r1").calls[1].request
    assert second["messages"][-1]["role"] == "tool"


async def test_stream_in_params_beats_the_streaming_policy(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server, streaming=True):
        agent = multiply_agent(params={"stream": False})
        await agent.invoke_async("What is 6 times 7?")

    assert streamed_calls(multiply_server) == [False, False]


async def test_string_messages_become_content_blocks(multiply_server: PolicyServer) -> None:
    with rollout_context(multiply_server):
        agent = multiply_agent(
            [
                {"role": "user", "content": "earlier", "name": "dropped"},
                {"role": "assistant", "content": [{"text": "kept"}]},
            ]
        )

    assert agent.messages == [
        {"role": "user", "content": [{"text": "earlier"}]},
        {"role": "assistant", "content": [{"text": "kept"}]},
    ]


async def test_a_second_agent_in_one_rollout_raises_value_error(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server):
        multiply_agent()
        with pytest.raises(ValueError, match="already has a sample source"):
            multiply_agent()


def test_the_placeholder_needs_an_active_rollout_context() -> None:
    with pytest.raises(RuntimeError, match="active RolloutContext"):
        multiply_agent()


async def test_the_placeholder_used_directly_raises_not_implemented() -> None:
    agent = Agent(model=OsmosisRolloutModel(), callback_handler=None)

    with pytest.raises(NotImplementedError, match="placeholder"):
        await agent.invoke_async("hi")


async def test_other_models_pass_through_and_register_nothing(
    multiply_server: PolicyServer,
) -> None:
    model = LiteLLMModel(model_id="openai/x")
    with rollout_context(multiply_server) as ctx:
        agent = OsmosisStrandsAgent(model=model, callback_handler=None)

    assert agent.model is model
    assert ctx.sample_source is None


async def test_a_preview_is_an_isolated_copy_of_the_latest_messages(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server) as ctx:
        agent = multiply_agent()
        await agent.invoke_async("What is 6 times 7?")
        assert ctx.sample_source is not None
        preview = await ctx.sample_source.get_preview(2)

    assert preview is not None
    assert len(preview.messages) == 2
    assert preview.extra_fields == {"_preview_truncated": True, "_preview_turn": 2}
    preview.messages[-1]["role"] = "changed"  # type: ignore[index]
    assert agent.messages[-1]["role"] == "assistant"


@pytest.fixture
def broken_mcp_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reproduce the LiteLLM releases that sent plain function tools down the MCP path,
    whose import of newer ``mcp`` names fails against the ``mcp`` Strands pins."""
    if not hasattr(litellm.main, "may_name_litellm_mcp_gateway"):
        pytest.skip("this LiteLLM release has no MCP gateway path to go wrong")
    monkeypatch.setattr(litellm.main, "may_name_litellm_mcp_gateway", lambda tools: True)
    monkeypatch.setitem(sys.modules, "litellm.responses.mcp.chat_completions_handler", None)


@pytest.mark.usefixtures("broken_mcp_path")
async def test_the_litellm_mcp_import_bug_cannot_stop_a_tool_call(
    multiply_server: PolicyServer,
) -> None:
    # Without the workaround the call fails before any request is sent.
    plain = Agent(
        model=LiteLLMModel(
            client_args={"api_base": multiply_server.rollout_url("bare"), "api_key": "k"},
            model_id="litellm_proxy/osmosis-rollout",
        ),
        tools=[multiply],
        callback_handler=None,
    )
    with pytest.raises(Exception, match="APIConnectionError"):
        await plain.invoke_async("What is 6 times 7?")
    assert multiply_server.log("bare").calls == []

    outcome = await run_multiply(multiply_server)

    assert outcome.result.status is RolloutStatus.SUCCESS, outcome.result.err_message
    assert outcome.result.sample is not None and outcome.result.sample.reward == 1.0
    assert len(multiply_server.log("r1").calls) == 2


async def test_no_litellm_call_flag_reaches_the_endpoint(multiply_server: PolicyServer) -> None:
    outcome = await run_multiply(multiply_server)

    assert outcome.result.status is RolloutStatus.SUCCESS, outcome.result.err_message
    sent = [sorted(record.request) for record in multiply_server.log("r1").calls]
    assert len(sent) == 2
    assert [key for keys in sent for key in keys if key.startswith("_")] == []
