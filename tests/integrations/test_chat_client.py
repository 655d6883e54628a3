"""RolloutChatClient: a framework-free tool loop against the real PolicyServer."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx
from integrations.support import rollout_context, streamed_calls

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    ExecutionRequest,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutStatus,
)
from osmosis_rollout.chat_client import RolloutChatClient
from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.errors import PolicyError
from osmosis_rollout.policy import ChatReply, ChatRequest, Faults, ToolCall, Usage

PROMPT = [{"role": "user", "content": "What is 6 times 7?"}]
MULTIPLY_TOOL = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


class ToolLoopWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> None:
        chat = RolloutChatClient(ctx.prompt, tools=[MULTIPLY_TOOL], temperature=1.0)
        for _ in range(5):
            reply = await chat.complete()
            if not reply.tool_calls:
                return
            for call in reply.tool_calls:
                args = json.loads(call["function"]["arguments"])
                chat.add_tool_result(call["id"], args["a"] * args["b"])


class ContentGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        answer = str(ctx.sample.messages[-1].get("content") or "")
        ctx.set_reward(1.0 if ctx.label and ctx.label in answer else 0.0)


async def run_tool_loop(server: PolicyServer, *, streaming: bool | None) -> Any:
    backend = LocalBackend(workflow=ToolLoopWorkflow, grader=ContentGrader)
    with rollout_context(server, "r1", streaming=streaming):
        return await backend.execute(
            ExecutionRequest(id="r1", prompt=PROMPT, label="42", agent_timeout_sec=10)
        )


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "plain"])
async def test_a_tool_loop_workflow_reaches_reward_one(
    multiply_server: PolicyServer, streaming: bool
) -> None:
    outcome = await run_tool_loop(multiply_server, streaming=streaming)

    assert outcome.result.status is RolloutStatus.SUCCESS, outcome.result.err_message
    assert outcome.result.sample is not None and outcome.result.sample.reward == 1.0
    assert streamed_calls(multiply_server) == [streaming, streaming]


async def test_the_sample_is_the_conversation_and_the_trajectory_adds_usage(
    multiply_server: PolicyServer,
) -> None:
    outcome = await run_tool_loop(multiply_server, streaming=None)

    sample = outcome.workflow.sample
    assert sample is not None
    assert list(sample.messages) == [
        PROMPT[0],
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_mul_1",
                    "type": "function",
                    "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_mul_1", "content": "42"},
        {"role": "assistant", "content": "The product is 42."},
    ]
    trajectory = list(sample.trajectory_messages or [])
    assert [set(m) - set(s) for m, s in zip(trajectory, sample.messages, strict=True)] == [
        set(),
        {"usage"},
        set(),
        {"usage"},
    ]
    assert trajectory[1]["usage"]["total_tokens"] > 0


async def test_streamed_and_plain_rollouts_record_identical_samples(
    multiply_server: PolicyServer,
) -> None:
    streamed = await run_tool_loop(multiply_server, streaming=True)
    plain = await run_tool_loop(multiply_server, streaming=False)

    assert streamed.workflow.sample is not None and plain.workflow.sample is not None
    assert list(streamed.workflow.sample.messages) == list(plain.workflow.sample.messages)
    assert streamed.workflow.sample.trajectory_messages == plain.workflow.sample.trajectory_messages


def long_parallel_calls(request: ChatRequest) -> ChatReply:
    return ChatReply(
        content="Let me compute both products, one word at a time, " * 6,
        tool_calls=[
            ToolCall("multiply", {"a": 123456789, "b": 987654321, "note": "x" * 80}, id="c1"),
            ToolCall("multiply", {"a": -5, "b": 11, "unicode": "produit é ✓"}, id="c2"),
        ],
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=31, completion_tokens=17),
    )


async def test_multi_chunk_streams_with_tool_call_deltas_assemble_like_plain_replies(
    serve_policy: Callable[..., PolicyServer],
) -> None:
    server = serve_policy(long_parallel_calls)
    with rollout_context(server):
        chat = RolloutChatClient(PROMPT, tools=[MULTIPLY_TOOL])
        streamed = await chat.complete(streaming=True)
        plain = await chat.complete(streaming=False)

    assert streamed.message == plain.message
    assert streamed.finish_reason == plain.finish_reason == "tool_calls"
    assert (
        streamed.usage
        == plain.usage
        == {
            "prompt_tokens": 31,
            "completion_tokens": 17,
            "total_tokens": 48,
        }
    )
    assert [json.loads(c["function"]["arguments"])["b"] for c in streamed.tool_calls] == [
        987654321,
        11,
    ]
    assert streamed.content == "Let me compute both products, one word at a time, " * 6


async def test_requests_carry_the_rollout_model_bearer_tools_and_params(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server, streaming=True):
        chat = RolloutChatClient(PROMPT, tools=[MULTIPLY_TOOL], temperature=0.5, max_tokens=64)
        await chat.complete(top_p=0.9)

    request = multiply_server.log("r1").calls[0].request
    assert request["model"] == "osmosis-rollout"
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert (request["temperature"], request["max_tokens"], request["top_p"]) == (0.5, 64, 0.9)
    assert request["tools"] == [MULTIPLY_TOOL]
    assert request["messages"] == PROMPT


async def test_a_wrong_key_is_a_policy_error_naming_the_status(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server) as ctx:
        ctx.api_key = "wrong"
        chat = RolloutChatClient(PROMPT)
        with pytest.raises(PolicyError, match="HTTP 401"):
            await chat.complete()

    assert chat.messages == PROMPT


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "plain"])
async def test_endpoint_errors_are_policy_errors(
    serve_policy: Callable[..., PolicyServer], streaming: bool
) -> None:
    server = serve_policy("unused", faults=Faults(fail_first=1, fail_status=500))
    with rollout_context(server):
        chat = RolloutChatClient(PROMPT, streaming=streaming)
        with pytest.raises(PolicyError, match="HTTP 500"):
            await chat.complete()


async def test_a_failing_policy_mid_stream_is_a_policy_error(
    serve_policy: Callable[..., PolicyServer],
) -> None:
    def broken(request: ChatRequest) -> str:
        raise RuntimeError("model crashed")

    server = serve_policy(broken)
    with rollout_context(server, streaming=True):
        chat = RolloutChatClient(PROMPT)
        with pytest.raises(PolicyError, match="model crashed"):
            await chat.complete()


async def test_a_malformed_stream_chunk_is_a_policy_error(
    serve_policy: Callable[..., PolicyServer],
) -> None:
    server = serve_policy("hello there", faults=Faults(malformed_chunk=True))
    with rollout_context(server, streaming=True):
        chat = RolloutChatClient(PROMPT)
        with pytest.raises(PolicyError, match="bad JSON"):
            await chat.complete()


async def test_a_production_style_single_chunk_stream_with_pings_is_understood(
    multiply_server: PolicyServer,
) -> None:
    # The production bridge: a ping comment, then one chunk holding the whole reply.
    chunk = {
        "id": "x",
        "object": "chat.completion.chunk",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "role": "assistant",
                    "content": "Calling.",
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_9",
                            "type": "function",
                            "function": {"name": "multiply", "arguments": '{"a":2,"b":3}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }
    body = f": ping\n\n: ping\n\ndata: {json.dumps(chunk)}\n\ndata: [DONE]\n\n"
    url = multiply_server.rollout_url("r1") + "/chat/completions"
    with respx.mock(assert_all_called=True) as router:
        router.post(url).mock(
            return_value=httpx.Response(
                200, text=body, headers={"content-type": "text/event-stream"}
            )
        )
        async with httpx.AsyncClient() as http:
            with rollout_context(multiply_server, streaming=True):
                chat = RolloutChatClient(PROMPT, http_client=http)
                reply = await chat.complete()

    assert reply.message == {
        "role": "assistant",
        "content": "Calling.",
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "multiply", "arguments": '{"a":2,"b":3}'},
            }
        ],
    }
    assert reply.finish_reason == "tool_calls"
    assert reply.usage == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


async def test_an_error_event_in_the_stream_is_a_policy_error(
    multiply_server: PolicyServer,
) -> None:
    body = 'event: error\ndata: {"error": {"message": "upstream overloaded"}}\n\ndata: [DONE]\n\n'
    url = multiply_server.rollout_url("r1") + "/chat/completions"
    with respx.mock() as router:
        router.post(url).mock(return_value=httpx.Response(200, text=body))
        async with httpx.AsyncClient() as http:
            with rollout_context(multiply_server, streaming=True):
                chat = RolloutChatClient(PROMPT, http_client=http)
                with pytest.raises(PolicyError, match="upstream overloaded"):
                    await chat.complete()


def test_the_client_needs_an_active_rollout_context() -> None:
    with pytest.raises(RuntimeError, match="active RolloutContext"):
        RolloutChatClient(PROMPT)


async def test_a_second_sample_source_raises_value_error(multiply_server: PolicyServer) -> None:
    with rollout_context(multiply_server):
        RolloutChatClient(PROMPT)
        with pytest.raises(ValueError, match="already has a sample source"):
            RolloutChatClient(PROMPT)


async def test_messages_added_by_the_workflow_are_recorded_in_order(
    multiply_server: PolicyServer,
) -> None:
    with rollout_context(multiply_server) as ctx:
        chat = RolloutChatClient([{"role": "system", "content": "Be brief."}])
        chat.add_user_message("hi")
        chat.add_message({"role": "assistant", "content": "hello"})
        chat.add_tool_result("call_1", {"value": 42})
        with pytest.raises(ValueError, match="role"):
            chat.add_message({"content": "no role"})
        sample = await ctx.get_sample()

    assert sample is not None
    assert [m["role"] for m in sample.messages] == ["system", "user", "assistant", "tool"]
    assert sample.messages[-1]["content"] == '{"value": 42}'


def test_warm_up_does_the_first_requests_one_time_work_ahead() -> None:
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import osmosis_rollout.chat_client as chat\n"
        "assert 'h11' not in sys.modules, 'imported before the warm-up'\n"
        "chat.warm_up()\n"
        "assert 'h11' in sys.modules and 'httpcore' in sys.modules\n"
        "assert chat.tls_context() is chat.tls_context()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
