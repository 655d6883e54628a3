"""What a policy receives (:class:`ChatRequest`) and returns (:class:`ChatReply`), and the protocol.

A policy is anything with ``async def complete(request) -> ChatReply``. The endpoint turns each
OpenAI chat-completions request into a :class:`ChatRequest` and each :class:`ChatReply` back into a
``chat.completion`` (or a stream of chunks), so a policy never sees HTTP.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from osmosis_rollout.errors import PolicyError

__all__ = [
    "ChatReply",
    "ChatRequest",
    "FinishReason",
    "Policy",
    "Text",
    "ToolCall",
    "Usage",
    "coerce_reply",
    "estimate_usage",
    "field_of",
    "new_call_id",
    "reply_tool_calls",
]

FinishReason = Literal["stop", "tool_calls", "length", "content_filter"]


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions call as a policy sees it.

    ``params`` holds every request field except ``model``, ``messages``, ``stream``,
    ``stream_options``, ``n`` and ``tools``: temperature, top_p, max_tokens, stop, seed,
    tool_choice, response_format and whatever else the client sent.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    params: dict[str, Any]
    rollout_id: str
    row: dict[str, Any] | None = None
    row_key: str | None = None
    attempt: int = 0
    model: str | None = None
    stream: bool = False

    @property
    def last_user_message(self) -> str | None:
        """Text of the last ``user`` message (text parts joined), or None when there is none."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _text_of(message.get("content"))
        return None

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools offered in this request, in order."""
        names: list[str] = []
        for tool in self.tools:
            function = tool.get("function")
            if isinstance(function, Mapping) and isinstance(function.get("name"), str):
                names.append(function["name"])
        return names


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model makes. ``arguments`` is a dict or an already-encoded JSON string."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @functools.cached_property
    def arguments_json(self) -> str:
        """The arguments as the JSON string the wire carries (encoded once: the reply and
        its estimated usage both read it)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True)
class Text:
    """A plain assistant text reply."""

    content: str


@dataclass
class Usage:
    """Token counts of one call; ``estimated`` when counted by us (chars / 4), not by a model.

    ``cost`` is what the provider (through LiteLLM) says the call cost, in US dollars, when it
    says; it stays out of :meth:`to_dict`, so a cassette never replays a cost as if it were spent.
    """

    prompt_tokens: int
    completion_tokens: int
    estimated: bool = False
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    @classmethod
    def from_dict(cls, usage: Mapping[str, Any]) -> Usage:
        """Read an OpenAI ``usage`` object (or :meth:`to_dict`'s); missing counts are 0."""
        return cls(
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            estimated=bool(usage.get("estimated", False)),
        )

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI ``usage`` object (plus ``estimated``)."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "estimated": self.estimated,
        }


@dataclass
class ChatReply:
    """A policy's answer, normalised: text and/or tool calls, a finish reason, optional usage."""

    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: str = "stop"
    usage: Usage | None = None

    def to_message(self) -> dict[str, Any]:
        """The OpenAI assistant message (tool call arguments as JSON strings)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call.id or new_call_id(),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call in self.tool_calls
            ]
        return message

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the cassette ``response`` shape); :meth:`from_dict` reverses it."""
        return {
            "content": self.content,
            "tool_calls": [
                {"id": call.id, "name": call.name, "arguments": call.arguments}
                for call in self.tool_calls
            ],
            "finish_reason": self.finish_reason,
            "usage": None if self.usage is None else self.usage.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ChatReply:
        """Rebuild a reply written by :meth:`to_dict`."""
        usage = data.get("usage")
        return cls(
            content=data.get("content"),
            tool_calls=[
                ToolCall(name=call["name"], arguments=call.get("arguments", {}), id=call.get("id"))
                for call in data.get("tool_calls") or []
            ],
            finish_reason=str(data.get("finish_reason") or "stop"),
            usage=Usage.from_dict(usage) if usage else None,
        )


@runtime_checkable
class Policy(Protocol):
    """The model behind the chat-completions endpoint."""

    async def complete(self, request: ChatRequest) -> ChatReply:
        """Answer one chat-completions call."""
        ...


def new_call_id() -> str:
    """A fresh OpenAI-style tool call id (``call_`` + 24 hex chars)."""
    return "call_" + secrets.token_hex(12)


def field_of(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` of a dict, else ``obj.name``: a provider's reply as JSON or as SDK objects."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def reply_tool_calls(message: Any) -> list[ToolCall]:
    """The tool calls of a provider's assistant message (a dict or an SDK object).

    A call without a function name is skipped; arguments that are neither a JSON string nor
    a dict become ``"{}"``; a call without an id gets a fresh one.
    """
    calls: list[ToolCall] = []
    for call in field_of(message, "tool_calls") or []:
        function = field_of(call, "function") or {}
        name = field_of(function, "name")
        if not name:
            continue
        arguments = field_of(function, "arguments")
        calls.append(
            ToolCall(
                name=str(name),
                arguments=arguments if isinstance(arguments, str | dict) else "{}",
                id=field_of(call, "id") or new_call_id(),
            )
        )
    return calls


def _text_of(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            part.get("text", "")
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
        return "\n".join(parts)
    return str(content)


def _char_count(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(_char_count(item) for item in value.values())
    if isinstance(value, list | tuple):
        return sum(_char_count(item) for item in value)
    return 0


def estimate_usage(request: ChatRequest, reply: ChatReply) -> Usage:
    """Rough token counts (characters / 4, at least 1) marked ``estimated=True``."""
    prompt_chars = _char_count(request.messages) + _char_count(request.tools)
    completion_chars = len(reply.content or "") + sum(
        len(call.name) + len(call.arguments_json) for call in reply.tool_calls
    )
    return Usage(
        prompt_tokens=max(1, prompt_chars // 4),
        completion_tokens=max(1, completion_chars // 4),
        estimated=True,
    )


def _tool_call_from_dict(data: Mapping[str, Any]) -> ToolCall:
    function = data.get("function")
    if isinstance(function, Mapping):
        name, arguments = function.get("name"), function.get("arguments", {})
    else:
        name, arguments = data.get("name"), data.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise PolicyError(f"a tool call needs a non-empty string name; got {dict(data)!r}")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict | str):
        raise PolicyError(
            f"tool call {name!r}: arguments must be a dict or a JSON string, "
            f"got {type(arguments).__name__}"
        )
    call_id = data.get("id")
    return ToolCall(
        name=name, arguments=arguments, id=call_id if isinstance(call_id, str) else None
    )


def _with_ids(calls: Sequence[ToolCall]) -> list[ToolCall]:
    return [
        call if call.id else ToolCall(name=call.name, arguments=call.arguments, id=new_call_id())
        for call in calls
    ]


def _reply_from_message(message: Mapping[str, Any], finish_reason: Any, usage: Any) -> ChatReply:
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        content = _text_of(content)
    calls = [_tool_call_from_dict(call) for call in message.get("tool_calls") or []]
    reason = finish_reason if isinstance(finish_reason, str) else None
    return ChatReply(
        content=content,
        tool_calls=_with_ids(calls),
        finish_reason=reason or ("tool_calls" if calls else "stop"),
        usage=Usage.from_dict(usage) if isinstance(usage, Mapping) else None,
    )


def coerce_reply(value: Any) -> ChatReply:
    """Normalise what a scripted policy returned into a :class:`ChatReply`.

    Accepts a :class:`ChatReply`, a ``str``, a :class:`Text`, a :class:`ToolCall`, a list of
    :class:`ToolCall` (optionally with one :class:`Text` or ``str``), an assistant message dict
    (``{"role": "assistant", "content": ..., "tool_calls": [...]}``, optionally with
    ``finish_reason`` and ``usage``) or a whole ``chat.completion`` dict. Tool calls without an
    id get a fresh ``call_...`` id.
    """
    if isinstance(value, ChatReply):
        if all(call.id for call in value.tool_calls):
            return value
        return dataclasses.replace(value, tool_calls=_with_ids(value.tool_calls))
    if isinstance(value, str):
        return ChatReply(content=value)
    if isinstance(value, Text):
        return ChatReply(content=value.content)
    if isinstance(value, ToolCall):
        return ChatReply(content=None, tool_calls=_with_ids([value]), finish_reason="tool_calls")
    if isinstance(value, Mapping):
        choices = value.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            first = choices[0]
            message = first.get("message")
            if isinstance(message, Mapping):
                return _reply_from_message(message, first.get("finish_reason"), value.get("usage"))
        return _reply_from_message(value, value.get("finish_reason"), value.get("usage"))
    if isinstance(value, list | tuple):
        texts = [item.content if isinstance(item, Text) else item for item in value]
        calls = [item for item in value if isinstance(item, ToolCall)]
        strings = [item for item in texts if isinstance(item, str)]
        if len(calls) + len(strings) == len(value) and len(strings) <= 1 and value:
            return ChatReply(
                content=strings[0] if strings else None,
                tool_calls=_with_ids(calls),
                finish_reason="tool_calls" if calls else "stop",
            )
    raise PolicyError(
        f"a policy returned {type(value).__name__}, which is not a reply; return a str, an "
        "assistant message dict, Text, ToolCall, a list of ToolCall, or ChatReply"
    )
