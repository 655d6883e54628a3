"""Real clients (the openai SDK and LiteLLM) against the policy endpoint on loopback."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from openai import AsyncOpenAI

from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.policy import ChatRequest, ToolCall

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

LONG_TEXT = "Two plus three is five, and that is the whole answer to your question."


def calculator(request: ChatRequest) -> Any:
    """A scripted model: calls tools when offered, then answers from the tool results."""
    if request.messages[-1]["role"] == "tool":
        results = [m["content"] for m in request.messages if m["role"] == "tool"]
        ids = [m["tool_call_id"] for m in request.messages if m["role"] == "tool"]
        asked = [
            call["id"]
            for m in request.messages
            if m["role"] == "assistant"
            for call in m.get("tool_calls") or []
        ]
        assert ids == asked, "tool results must answer the calls made"
        return f"The results are {' and '.join(results)}."
    if "both" in (request.last_user_message or ""):
        return [ToolCall("add", {"a": 2, "b": 3}), ToolCall("mul", {"a": 2, "b": 3})]
    if request.tools:
        return ToolCall("add", {"a": 2, "b": 3})
    return LONG_TEXT


def _client(server: PolicyServer, rollout_id: str) -> AsyncOpenAI:
    return AsyncOpenAI(
        base_url=server.rollout_url(rollout_id), api_key=server.api_key, max_retries=0, timeout=10
    )


async def _openai_call(
    server: PolicyServer, rollout_id: str, *, stream: bool, **kwargs: Any
) -> dict[str, Any]:
    """One call through the openai SDK, returned as an assistant message + extras."""
    client = _client(server, rollout_id)
    try:
        if not stream:
            completion = await client.chat.completions.create(model="osmosis-rollout", **kwargs)
            message = completion.choices[0].message
            return {
                "content": message.content,
                "tool_calls": [call.model_dump() for call in message.tool_calls or []],
                "finish_reason": completion.choices[0].finish_reason,
                "usage": completion.usage.model_dump() if completion.usage else None,
                "model": completion.model,
                "content_chunks": None,
            }
        result: dict[str, Any] = {
            "content": None,
            "tool_calls": [],
            "finish_reason": None,
            "usage": None,
            "content_chunks": 0,
            "argument_chunks": 0,
            "first_role": None,
        }
        calls: dict[int, dict[str, Any]] = {}
        chunks = await client.chat.completions.create(
            model="osmosis-rollout", stream=True, **kwargs
        )
        async for chunk in chunks:
            result["model"] = chunk.model
            if chunk.usage is not None:
                result["usage"] = chunk.usage.model_dump()
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            delta = choice.delta
            if result["first_role"] is None:
                result["first_role"] = delta.role
            if delta.content:
                result["content"] = (result["content"] or "") + delta.content
                result["content_chunks"] += 1
            for part in delta.tool_calls or []:
                call = calls.setdefault(
                    part.index, {"id": None, "type": "function", "function": {"name": None}}
                )
                call["function"].setdefault("arguments", "")
                if part.id:
                    call["id"] = part.id
                if part.function and part.function.name:
                    call["function"]["name"] = part.function.name
                if part.function and part.function.arguments:
                    call["function"]["arguments"] += part.function.arguments
                    result["argument_chunks"] += 1
            if choice.finish_reason:
                result["finish_reason"] = choice.finish_reason
        result["tool_calls"] = [calls[i] for i in sorted(calls)]
        return result
    finally:
        await client.close()


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_openai_client_receives_text_reply(
    serve: Callable[..., PolicyServer], stream: bool
) -> None:
    server = serve(calculator)
    reply = await _openai_call(
        server, "r-text", stream=stream, messages=[{"role": "user", "content": "2+3?"}]
    )
    assert reply["content"] == LONG_TEXT
    assert reply["tool_calls"] == []
    assert reply["finish_reason"] == "stop"
    assert reply["model"] == "osmosis-rollout"
    if stream:
        assert reply["first_role"] == "assistant"
        assert reply["content_chunks"] > 1, "content must arrive over several deltas"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_openai_client_receives_one_tool_call(
    serve: Callable[..., PolicyServer], stream: bool, tools: dict[str, Any]
) -> None:
    server = serve(calculator)
    reply = await _openai_call(
        server,
        "r-tool",
        stream=stream,
        messages=[{"role": "user", "content": "2+3?"}],
        tools=[tools["add"]],
    )
    assert reply["finish_reason"] == "tool_calls"
    assert reply["content"] is None
    [call] = reply["tool_calls"]
    assert call["id"].startswith("call_")
    assert call["function"]["name"] == "add"
    assert json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    if stream:
        assert reply["argument_chunks"] > 1, "arguments must arrive incrementally"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_openai_client_receives_two_parallel_tool_calls_then_answers_from_results(
    serve: Callable[..., PolicyServer], stream: bool, tools: dict[str, Any]
) -> None:
    server = serve(calculator)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "do both with 2 and 3"}]
    offered = [tools["add"], tools["mul"]]
    first = await _openai_call(server, "r-par", stream=stream, messages=messages, tools=offered)
    calls = first["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["add", "mul"]
    assert len({c["id"] for c in calls}) == 2
    messages.append({"role": "assistant", "content": None, "tool_calls": calls})
    outputs = {"add": "5", "mul": "6"}
    for call in calls:
        messages.append(
            {
                "role": "tool",
                "tool_call_id": call["id"],
                "content": outputs[call["function"]["name"]],
            }
        )
    second = await _openai_call(server, "r-par", stream=stream, messages=messages, tools=offered)
    assert second["content"] == "The results are 5 and 6."
    assert second["finish_reason"] == "stop"
    log = server.log("r-par")
    assert log.n_calls == 2 and log.n_errors == 0
    assert log.calls[1].request["messages"][-1]["role"] == "tool"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_usage_is_reported_when_asked(
    serve: Callable[..., PolicyServer], stream: bool
) -> None:
    server = serve(calculator)
    kwargs: dict[str, Any] = {"messages": [{"role": "user", "content": "2+3?"}]}
    if stream:
        kwargs["stream_options"] = {"include_usage": True}
    reply = await _openai_call(server, "r-usage", stream=stream, **kwargs)
    usage = reply["usage"]
    assert usage is not None
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 0
    log = server.log("r-usage")
    assert log.total_tokens == usage["total_tokens"]
    assert log.tokens_estimated, "a scripted policy gives no usage, so tokens are estimates"


async def test_stream_without_include_usage_carries_no_usage(
    serve: Callable[..., PolicyServer],
) -> None:
    server = serve(calculator)
    reply = await _openai_call(
        server, "r-nousage", stream=True, messages=[{"role": "user", "content": "2+3?"}]
    )
    assert reply["usage"] is None
    assert reply["content"] == LONG_TEXT


# -- LiteLLM as the client (what the OpenAI Agents and Strands integrations use) ------------


async def _litellm_call(server: PolicyServer, rollout_id: str, **kwargs: Any) -> Any:
    import litellm

    chunks = []
    response = await litellm.acompletion(
        model="openai/osmosis-rollout",
        api_base=server.rollout_url(rollout_id),
        api_key=server.api_key,
        stream=True,
        stream_options={"include_usage": True},
        timeout=10,
        **kwargs,
    )
    async for chunk in response:
        chunks.append(chunk)
    return litellm.stream_chunk_builder(chunks, messages=kwargs["messages"]), chunks


async def test_litellm_streams_text_with_usage(serve: Callable[..., PolicyServer]) -> None:
    server = serve(calculator)
    built, chunks = await _litellm_call(
        server, "l-text", messages=[{"role": "user", "content": "2+3?"}]
    )
    assert built.choices[0].message.content == LONG_TEXT
    assert built.choices[0].finish_reason == "stop"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    assert built.usage.total_tokens == server.log("l-text").total_tokens


async def test_litellm_streams_one_tool_call(
    serve: Callable[..., PolicyServer], tools: dict[str, Any]
) -> None:
    server = serve(calculator)
    built, chunks = await _litellm_call(
        server, "l-tool", messages=[{"role": "user", "content": "2+3?"}], tools=[tools["add"]]
    )
    [call] = built.choices[0].message.tool_calls
    assert call.function.name == "add"
    assert json.loads(call.function.arguments) == {"a": 2, "b": 3}
    assert call.id.startswith("call_")
    # Read from the chunks: LiteLLM 1.80's chunk builder reports "stop" for this stream.
    reasons = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert reasons == ["tool_calls"]


async def test_litellm_streams_parallel_tool_calls_and_a_multi_turn_answer(
    serve: Callable[..., PolicyServer], tools: dict[str, Any]
) -> None:
    server = serve(calculator)
    offered = [tools["add"], tools["mul"]]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "do both with 2 and 3"}]
    built, _ = await _litellm_call(server, "l-par", messages=messages, tools=offered)
    calls = built.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["add", "mul"]
    assert [json.loads(c.function.arguments) for c in calls] == [{"a": 2, "b": 3}] * 2
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in calls
            ],
        }
    )
    messages += [
        {"role": "tool", "tool_call_id": calls[0].id, "content": "5"},
        {"role": "tool", "tool_call_id": calls[1].id, "content": "6"},
    ]
    second, _ = await _litellm_call(server, "l-par", messages=messages, tools=offered)
    assert second.choices[0].message.content == "The results are 5 and 6."
    assert second.usage.total_tokens > 0
    assert server.log("l-par").n_calls == 2
