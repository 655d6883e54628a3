"""Framework-native message shapes convert to the same steps as their chat-format views."""

from __future__ import annotations

from typing import Any

import pytest

from osmosis_rollout.trajectory import messages_to_steps

# Strands `agent.messages` (native blocks) ...
STRANDS_NATIVE: list[dict[str, Any]] = [
    {"role": "user", "content": [{"text": "2+2?"}]},
    {
        "role": "assistant",
        "content": [
            {"reasoningContent": {"reasoningText": {"text": "add them"}}},
            {"text": "let me"},
            {"toolUse": {"toolUseId": "t1", "name": "add", "input": {"a": 2}}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"toolResult": {"toolUseId": "t1", "status": "success", "content": [{"text": "4"}]}}
        ],
    },
    {"role": "assistant", "content": [{"text": "4"}]},
]
# ... and what strands-agents 1.62's LiteLLMModel.format_request_messages makes of them
# (captured; reasoning is dropped by the formatter), i.e. the sample's trajectory_messages.
STRANDS_LITELLM: list[dict[str, Any]] = [
    {"role": "user", "content": [{"text": "2+2?", "type": "text"}]},
    {
        "role": "assistant",
        "content": [{"text": "let me", "type": "text"}],
        "tool_calls": [
            {
                "function": {"arguments": '{"a": 2}', "name": "add"},
                "id": "t1",
                "type": "function",
            }
        ],
    },
    {"role": "tool", "tool_call_id": "t1", "content": "4"},
    {"role": "assistant", "content": [{"text": "4", "type": "text"}]},
]

# OpenAI Agents session items (Responses-API input shape).
AGENTS_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "weather in Oslo?"},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "checking", "annotations": []}],
    },
    {
        "type": "function_call",
        "call_id": "call_w",
        "name": "weather",
        "arguments": '{"city": "Oslo"}',
        "id": "fc_1",
    },
    {"type": "function_call_output", "call_id": "call_w", "output": "rain"},
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_2",
        "status": "completed",
        "content": [{"type": "output_text", "text": "It rains.", "annotations": []}],
    },
]


def test_strands_litellm_messages_convert_like_openai_chat() -> None:
    steps = messages_to_steps(STRANDS_LITELLM)
    assert steps[1]["message"] == "let me"
    assert steps[1]["tool_calls"] == [
        {"tool_call_id": "t1", "function_name": "add", "arguments": {"a": 2}}
    ]
    assert steps[1]["observation"] == {"results": [{"source_call_id": "t1", "content": "4"}]}


def test_strands_native_blocks_convert_to_the_same_steps_as_their_chat_view() -> None:
    native = messages_to_steps(STRANDS_NATIVE)
    assert native[1].pop("reasoning_content") == "add them"
    assert native == messages_to_steps(STRANDS_LITELLM)


def test_strands_error_tool_result_keeps_its_status() -> None:
    steps = messages_to_steps(
        [
            STRANDS_NATIVE[1],
            {
                "role": "user",
                "content": [
                    {
                        "toolResult": {
                            "toolUseId": "t1",
                            "status": "error",
                            "content": [{"text": "x"}],
                        }
                    },
                    {"text": "try again"},
                ],
            },
        ]
    )
    assert steps[0]["observation"]["results"] == [
        {"source_call_id": "t1", "content": "x", "extra": {"status": "error"}}
    ]
    assert steps[1] == {"step_id": 2, "source": "user", "message": "try again"}


def test_openai_agents_items_convert_to_the_same_steps_as_the_sdk_chat_conversion() -> None:
    converter = pytest.importorskip("agents.models.chatcmpl_converter").Converter
    chat = converter.items_to_messages(AGENTS_ITEMS)
    assert chat[1]["tool_calls"][0]["id"] == "call_w"  # the SDK's own chat view
    steps = messages_to_steps(AGENTS_ITEMS)
    assert steps == messages_to_steps(chat)
    assert [s["source"] for s in steps] == ["user", "agent", "agent"]
    assert steps[1]["observation"] == {"results": [{"source_call_id": "call_w", "content": "rain"}]}
