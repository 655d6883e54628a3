"""Scripted policies and reply normalisation."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from osmosis_rollout.errors import PolicyError
from osmosis_rollout.policy import (
    ChatReply,
    ChatRequest,
    Policy,
    ScriptedPolicy,
    Text,
    ToolCall,
    Usage,
    as_policy,
    coerce_reply,
    estimate_usage,
)


def _request(rollout_id: str = "r1", content: str = "hi") -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": content}], tools=[], params={}, rollout_id=rollout_id
    )


@pytest.mark.parametrize(
    ("value", "content", "calls", "finish"),
    [
        ("hello", "hello", [], "stop"),
        (Text("hello"), "hello", [], "stop"),
        (ToolCall("add", {"a": 1}), None, [("add", '{"a": 1}')], "tool_calls"),
        ([ToolCall("a"), ToolCall("b", "{}")], None, [("a", "{}"), ("b", "{}")], "tool_calls"),
        (["thinking", ToolCall("a")], "thinking", [("a", "{}")], "tool_calls"),
        ({"role": "assistant", "content": "hey"}, "hey", [], "stop"),
        (
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_9", "function": {"name": "f", "arguments": "{}"}}],
            },
            None,
            [("f", "{}")],
            "tool_calls",
        ),
        ({"role": "assistant", "content": "cut", "finish_reason": "length"}, "cut", [], "length"),
        (
            {"choices": [{"message": {"content": "full"}, "finish_reason": "stop"}]},
            "full",
            [],
            "stop",
        ),
    ],
)
def test_coerce_reply_accepts_every_documented_shape(
    value: Any, content: str | None, calls: list[tuple[str, str]], finish: str
) -> None:
    reply = coerce_reply(value)
    assert reply.content == content
    assert [(c.name, c.arguments_json) for c in reply.tool_calls] == calls
    assert all(c.id and c.id.startswith("call_") for c in reply.tool_calls)
    assert reply.finish_reason == finish


@pytest.mark.parametrize("value", [42, None, [1, 2], {"role": "assistant", "tool_calls": [{}]}])
def test_coerce_reply_rejects_what_is_not_a_reply(value: Any) -> None:
    with pytest.raises(PolicyError):
        coerce_reply(value)


def test_reply_round_trips_through_its_dict_form() -> None:
    reply = ChatReply(
        "x", [ToolCall("f", {"k": [1]}, id="call_1")], "tool_calls", Usage(3, 4, True)
    )
    assert ChatReply.from_dict(reply.to_dict()) == reply
    assert reply.to_message() == {
        "role": "assistant",
        "content": "x",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "f", "arguments": '{"k": [1]}'},
            }
        ],
    }


async def test_plain_def_policy_runs_in_a_worker_thread() -> None:
    threads: list[threading.Thread] = []

    def policy(request: ChatRequest) -> str:
        threads.append(threading.current_thread())
        return "ok"

    assert (await as_policy(policy).complete(_request())).content == "ok"
    assert threads[0] is not threading.current_thread()


async def test_async_callables_and_callable_objects_are_awaited() -> None:
    async def fn(request: ChatRequest) -> str:
        return "fn"

    class Obj:
        async def __call__(self, request: ChatRequest) -> Text:
            return Text("obj")

    assert (await as_policy(fn).complete(_request())).content == "fn"
    assert (await as_policy(Obj()).complete(_request())).content == "obj"


async def test_sequence_items_may_be_callables_and_run_out_loudly() -> None:
    policy = ScriptedPolicy(["one", lambda request: f"echo {request.last_user_message}"])
    assert (await policy.complete(_request(content="a"))).content == "one"
    assert (await policy.complete(_request(content="b"))).content == "echo b"
    with pytest.raises(PolicyError, match=r"call #3 but the script holds 2"):
        await policy.complete(_request())


async def test_constant_policy_mints_fresh_tool_call_ids() -> None:
    policy = as_policy(ToolCall("add", {"a": 1}))
    first, second = await policy.complete(_request()), await policy.complete(_request())
    assert first.tool_calls[0].id != second.tool_calls[0].id


def test_as_policy_keeps_policies_and_refuses_nonsense() -> None:
    class Mine:
        async def complete(self, request: ChatRequest) -> ChatReply:
            return ChatReply("mine")

    mine = Mine()
    assert as_policy(mine) is mine
    assert isinstance(mine, Policy)
    with pytest.raises(TypeError, match="cannot use int as a policy"):
        as_policy(3)
    with pytest.raises(ValueError, match="at least one reply"):
        ScriptedPolicy([])


def test_estimated_usage_is_marked_and_positive() -> None:
    usage = estimate_usage(_request(content="x" * 400), ChatReply("y" * 40))
    assert usage.estimated
    assert usage.prompt_tokens >= 100 and usage.completion_tokens == 10
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
