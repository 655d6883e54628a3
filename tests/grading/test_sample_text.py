"""Sample text helpers: the answer, the task and the tool calls, in every message shape."""

from __future__ import annotations

from typing import Any

import pytest
from grading_support import AGENTS_ITEMS, ANSWER, CHAT_MESSAGES, QUESTION, STRANDS_MESSAGES
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from osmosis_rollout.sample_text import (
    assistant_texts,
    first_user_text,
    last_assistant_text,
    tool_calls,
)
from osmosis_rollout.types import RolloutSample

MULTIPLY = [{"name": "multiply", "arguments": {"a": 6, "b": 7}}]


def test_every_shape_yields_the_same_answer_task_and_tool_calls(
    conversation: list[dict[str, Any]],
) -> None:
    assert last_assistant_text(conversation) == ANSWER
    assert first_user_text(conversation) == QUESTION
    assert tool_calls(conversation) == MULTIPLY


def test_a_rollout_sample_is_read_through_its_messages(conversation: list[dict[str, Any]]) -> None:
    sample = RolloutSample(messages=conversation)
    assert last_assistant_text(sample) == ANSWER
    assert tool_calls(sample) == MULTIPLY


def test_assistant_texts_lists_every_assistant_turn_with_text_in_order() -> None:
    assert assistant_texts(CHAT_MESSAGES) == [ANSWER]
    assert assistant_texts(AGENTS_ITEMS) == [ANSWER]
    assert assistant_texts(STRANDS_MESSAGES) == ["Let me multiply.", ANSWER]


def test_a_final_tool_call_only_turn_does_not_hide_the_last_text() -> None:
    messages = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "first answer"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "lookup", "arguments": "{}"}}],
        },
    ]
    assert last_assistant_text(messages) == "first answer"
    assert tool_calls(messages) == [{"name": "lookup", "arguments": {}}]


def test_no_assistant_text_gives_an_empty_string() -> None:
    assert last_assistant_text([{"role": "user", "content": "hi"}]) == ""
    assert last_assistant_text(RolloutSample(messages=[])) == ""
    assert first_user_text([{"role": "assistant", "content": "hello"}]) == ""


def test_text_parts_are_joined_and_refusals_and_reasoning_are_not_text() -> None:
    message = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "line one"},
            {"type": "refusal", "refusal": "no"},
            {"reasoningContent": {"reasoningText": {"text": "thinking"}}},
            {"type": "output_text", "text": "line two"},
        ],
    }
    assert last_assistant_text([message]) == "line one\nline two"


def test_a_strands_tool_result_is_not_the_users_task() -> None:
    messages = [STRANDS_MESSAGES[2], {"role": "user", "content": [{"text": "real task"}]}]
    assert first_user_text(messages) == "real task"


def test_malformed_tool_arguments_are_kept_raw_not_dropped() -> None:
    messages = [
        {"type": "function_call", "call_id": "c1", "name": "multiply", "arguments": "{a: 6"},
        {"type": "function_call", "call_id": "c2", "name": "multiply", "arguments": "[6, 7]"},
        {"type": "function_call", "call_id": "c3", "name": "ping", "arguments": ""},
    ]
    assert tool_calls(messages) == [
        {"name": "multiply", "arguments": {"_raw": "{a: 6"}},
        {"name": "multiply", "arguments": {"_raw": "[6, 7]"}},
        {"name": "ping", "arguments": {}},
    ]


def test_legacy_chat_function_call_counts_as_a_tool_call() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'},
    }
    assert tool_calls(message) == MULTIPLY


def test_pydantic_items_from_the_openai_sdk_are_read_like_dicts() -> None:
    items = [
        ResponseFunctionToolCall(
            type="function_call", call_id="c1", name="multiply", arguments='{"a": 6, "b": 7}'
        ),
        ResponseOutputMessage(
            type="message",
            id="msg_1",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text=ANSWER, annotations=[])],
        ),
    ]
    assert last_assistant_text(items) == ANSWER
    assert tool_calls(items) == MULTIPLY


def test_user_tool_calls_are_ignored_and_results_are_not_calls() -> None:
    messages = [
        {"role": "user", "content": "x", "tool_calls": [{"function": {"name": "evil"}}]},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    assert tool_calls(messages) == []


def test_a_value_with_no_messages_is_refused_with_a_type_error() -> None:
    with pytest.raises(TypeError, match="list of messages; got int"):
        last_assistant_text(42)
