"""Shared data for the grading tests (imported by name; ``conftest.py`` puts this folder on
``sys.path``): one conversation (ask, tool call, tool result, answer) in each message shape a
sample can hold."""

from __future__ import annotations

from typing import Any

QUESTION = "What is 6 times 7?"
ANSWER = "6 times 7 is 42."

#: OpenAI chat format, as the framework-free client and LiteLLM produce it.
CHAT_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You multiply numbers."},
    {"role": "user", "content": QUESTION},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    {"role": "assistant", "content": [{"type": "text", "text": ANSWER}]},
]

#: OpenAI Agents SDK session items (Responses input-item shape).
AGENTS_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": QUESTION},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "multiply"}]},
    {
        "type": "function_call",
        "call_id": "call_1",
        "name": "multiply",
        "arguments": '{"a": 6, "b": 7}',
        "id": "fc_1",
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "42"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": ANSWER, "annotations": []}],
    },
]

#: Strands Agents messages.
STRANDS_MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": [{"text": QUESTION}]},
    {
        "role": "assistant",
        "content": [
            {"text": "Let me multiply."},
            {"toolUse": {"toolUseId": "tooluse_1", "name": "multiply", "input": {"a": 6, "b": 7}}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "toolResult": {
                    "toolUseId": "tooluse_1",
                    "status": "success",
                    "content": [{"text": "42"}],
                }
            }
        ],
    },
    {"role": "assistant", "content": [{"text": ANSWER}]},
]

SHAPES = {"chat": CHAT_MESSAGES, "agents": AGENTS_ITEMS, "strands": STRANDS_MESSAGES}
