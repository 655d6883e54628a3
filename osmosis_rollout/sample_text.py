"""Read the answer and the tool calls out of a sample, whatever shape its messages have.

Graders keep rewriting the same few lines; these helpers understand the three message shapes a
rollout sample can hold:

- **OpenAI chat format** (the framework-free client, LiteLLM):
  ``{"role": "assistant", "content": "..." | [{"type": "text", "text": ...}],
  "tool_calls": [{"id", "type": "function", "function": {"name", "arguments": "<json>"}}]}``;
- **OpenAI Agents SDK session items** (Responses input-item shape):
  ``{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ...}]}``,
  ``{"type": "function_call", "name", "arguments": "<json>", "call_id"}``,
  ``{"type": "function_call_output", ...}``;
- **Strands messages**: ``{"role": "assistant", "content": [{"text": ...},
  {"toolUse": {"toolUseId", "name", "input": {...}}}]}``, tool results as
  ``{"role": "user", "content": [{"toolResult": {...}}]}``.

Every helper takes a :class:`~osmosis_rollout.types.RolloutSample`, anything with a ``messages``
attribute, a list of messages, or a single message. Messages may be dicts or pydantic models.
Text parts of one message are joined with a newline; which parts are text is said once, in
:mod:`osmosis_rollout._internal.message_parts` (refusals and reasoning are not).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from osmosis_rollout._internal.message_parts import part_text

__all__ = [
    "ToolCallInfo",
    "assistant_texts",
    "first_user_text",
    "last_assistant_text",
    "tool_calls",
]


class ToolCallInfo(TypedDict):
    """One tool call: its name and its arguments decoded to a dict."""

    name: str
    arguments: dict[str, Any]


def last_assistant_text(sample_or_messages: Any) -> str:
    """Text of the last assistant message that has any text, or ``""`` when none has.

    Assistant turns holding only tool calls are skipped, so an Agents SDK turn split into a
    message item followed by function-call items still yields the message's text.
    """
    texts = assistant_texts(sample_or_messages)
    return texts[-1] if texts else ""


def assistant_texts(sample_or_messages: Any) -> list[str]:
    """Texts of every assistant message that has text, in conversation order."""
    texts = (_text_of(message, "assistant") for message in _messages(sample_or_messages))
    return [text for text in texts if text is not None]


def first_user_text(sample_or_messages: Any) -> str:
    """Text of the first user message with text (the task the rollout was given), or ``""``.

    Strands tool results (``user`` messages holding only ``toolResult`` parts) have no text.
    """
    for message in _messages(sample_or_messages):
        text = _text_of(message, "user")
        if text is not None:
            return text
    return ""


def tool_calls(sample_or_messages: Any) -> list[ToolCallInfo]:
    """Every tool call the assistant made, in order, as ``{"name": ..., "arguments": {...}}``.

    JSON-encoded arguments are decoded; an empty string decodes to ``{}``. Arguments that are not
    a JSON object (malformed model output) are kept as ``{"_raw": "<the text>"}`` rather than
    dropped, so a grader can still see and penalise them.
    """
    calls: list[ToolCallInfo] = []
    for message in _messages(sample_or_messages):
        kind = message.get("type")
        if kind == "function_call":  # Agents SDK / Responses item
            _append_call(calls, message.get("name"), message.get("arguments"))
            continue
        if kind not in (None, "message") or message.get("role") != "assistant":
            continue
        for call in message.get("tool_calls") or ():  # OpenAI chat
            call = _as_mapping(call)
            function = _as_mapping(call.get("function"))
            _append_call(calls, function.get("name"), function.get("arguments"))
        legacy = message.get("function_call")  # pre-tools OpenAI chat
        if legacy:
            legacy = _as_mapping(legacy)
            _append_call(calls, legacy.get("name"), legacy.get("arguments"))
        content = message.get("content")
        if isinstance(content, list):  # Strands toolUse blocks
            for part in content:
                use = _as_mapping(_as_mapping(part).get("toolUse"))
                if use:
                    _append_call(calls, use.get("name"), use.get("input"))
    return calls


def _messages(source: Any) -> list[Mapping[str, Any]]:
    if isinstance(source, Mapping):
        if "role" in source or "type" in source:
            return [source]
        source = source.get("messages") or ()
    elif not isinstance(source, list | tuple):
        # Checked before Iterable: a pydantic model (RolloutSample) iterates over its fields.
        messages = getattr(source, "messages", None)
        if messages is not None:
            source = messages
        elif not isinstance(source, Iterable) or isinstance(source, str | bytes):
            raise TypeError(
                "expected a RolloutSample, an object with .messages, or a list of messages; "
                f"got {type(source).__name__}"
            )
    return [_as_mapping(message) for message in source]


def _as_mapping(value: Any) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump()
        if isinstance(dumped, Mapping):
            return dumped
    return {}


def _text_of(message: Mapping[str, Any], role: str) -> str | None:
    if message.get("type") not in (None, "message") or message.get("role") != role:
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content if content.strip() else None
    if not isinstance(content, list):
        return None
    texts = (part_text(part if isinstance(part, str) else _as_mapping(part)) for part in content)
    joined = "\n".join(text for text in texts if text is not None)
    return joined if joined.strip() else None


def _append_call(calls: list[ToolCallInfo], name: Any, arguments: Any) -> None:
    if not isinstance(name, str) or not name:
        return
    calls.append({"name": name, "arguments": _decode_arguments(arguments)})


def _decode_arguments(arguments: Any) -> dict[str, Any]:
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, str):
        if not arguments.strip():
            return {}
        try:
            decoded = json.loads(arguments)
        except ValueError:
            return {"_raw": arguments}
        return dict(decoded) if isinstance(decoded, dict) else {"_raw": arguments}
    return {"_raw": str(arguments)}
