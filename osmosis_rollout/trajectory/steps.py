"""Chat messages -> ATIF v1.7 steps.

The input is what ``RolloutSample.trajectory_messages`` holds: OpenAI chat-format messages
(assistant ``tool_calls`` with ``function.name`` / ``function.arguments``, role ``tool``
results with ``tool_call_id``). Other shapes are accepted because real frameworks emit
them: LiteLLM content lists (``[{"type": "text", "text": ...}]``), native Strands blocks
(``text``, ``toolUse``, ``toolResult``, ``reasoningContent``) and Responses-API input items
(``function_call``, ``function_call_output``, ``reasoning``, ``message``) as the OpenAI
Agents SDK keeps them in its session.

Conversion is best-effort and total: a malformed message never fails the document, and
whatever does not fit an ATIF field is kept under the step's ``extra``.

Rules:

- roles: ``system``/``developer`` -> ``system``, ``assistant`` -> ``agent``, ``user`` ->
  ``user``; any other role -> ``user`` with ``extra.original_role``;
- content: ``None`` -> ``""``, a string as is, a list of text parts joined with newlines,
  anything else as JSON text;
- tool calls: id defaults to ``call_<i>``, name to ``unknown``; arguments parsed from JSON
  into an object (``{}`` when empty, ``{"_raw": text}`` when invalid or not an object);
- role ``tool``/``function`` results fold into the preceding agent step's
  ``observation.results`` (``source_call_id`` when the id matches one of that step's calls,
  else ``null`` plus ``extra.tool_call_id``); with no preceding agent step they become a
  ``system`` step with an empty message;
- ``reasoning_content`` and ``tool_calls`` on non-agent steps move into ``extra``;
- agent-step ``metrics`` from inline ``usage`` (or ``extra.response.usage``), chat or
  Responses names, zeros kept; ``llm_call_count = 1`` when metrics exist;
- agent-step ``model_name`` from ``model`` / ``model_name`` / ``extra.response.model``;
- ``timestamp`` from ``created_at`` / ``timestamp`` / ``completed_at`` / ``extra.timestamp``
  as ISO 8601 (epoch seconds and aware times in UTC).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeGuard

from osmosis_rollout._internal.message_parts import part_text

__all__ = ["messages_to_steps"]

Source = Literal["system", "user", "agent"]

_ROLE_TO_SOURCE: dict[str, Source] = {
    "system": "system",
    "developer": "system",
    "assistant": "agent",
    "user": "user",
}
_TOOL_RESULT_ROLES = frozenset({"tool", "function"})
_TIMESTAMP_KEYS = ("created_at", "timestamp", "completed_at")
_USAGE_DETAIL_KEYS = (
    "prompt_tokens_details",
    "input_tokens_details",
    "completion_tokens_details",
    "output_tokens_details",
)
# Epoch values above this are taken as milliseconds (year 5138 in seconds).
_EPOCH_MILLIS_THRESHOLD = 1e11


@dataclass(slots=True)
class _Step:
    """A step under construction; results fold in after it is created."""

    source: Source
    message: str
    timestamp: str | None = None
    model_name: str | None = None
    reasoning_content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] | None = None
    metrics: dict[str, Any] | None = None
    extra: dict[str, Any] | None = None
    # Opened by a Responses "reasoning" item: the turn's message and calls come next.
    awaiting_output: bool = False

    def add_extra(self, key: str, value: Any) -> None:
        if self.extra is None:
            self.extra = {}
        self.extra[key] = value

    def to_dict(self, step_id: int) -> dict[str, Any]:
        """ATIF key order, ``None`` fields omitted."""
        fields = {
            "step_id": step_id,
            "timestamp": self.timestamp,
            "source": self.source,
            "model_name": self.model_name,
            "message": self.message,
            "reasoning_content": self.reasoning_content,
            "tool_calls": self.tool_calls or None,
            "observation": {"results": self.results} if self.results is not None else None,
            "metrics": self.metrics,
            "llm_call_count": 1 if self.metrics is not None else None,
            "extra": self.extra,
        }
        return {key: value for key, value in fields.items() if value is not None}


def messages_to_steps(messages: Iterable[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """Convert chat messages (or Responses items) into ATIF step dicts numbered from 1.

    Never raises on odd input: non-mapping entries are skipped and unknown shapes are
    preserved under ``extra``. The result may be empty (an empty conversation).
    """
    steps: list[_Step] = []
    for message in messages or ():
        if isinstance(message, Mapping):
            _convert_one(steps, message)
    return [step.to_dict(index) for index, step in enumerate(steps, start=1)]


def _convert_one(steps: list[_Step], message: Mapping[str, Any]) -> None:
    role = message.get("role")
    role_text = "" if role is None else str(role)
    # Responses-API items carry a type and no role; a chat message with a role is
    # classified by its role whatever its "type" says.
    kind = message.get("type") if role is None else None
    if kind == "function_call":
        _add_responses_call(steps, message)
    elif kind == "function_call_output":
        output = message.get("output")
        _fold_result(steps, message.get("call_id"), output, role="function_call_output")
    elif kind == "reasoning":
        _add_responses_reasoning(steps, message)
    elif kind is not None and "content" not in message:
        _add_unknown_item(steps, message, str(kind))
    elif role_text in _TOOL_RESULT_ROLES:
        _fold_result(steps, message.get("tool_call_id"), message.get("content"), role=role_text)
    else:
        _add_message(steps, message, role_text)


def _add_message(steps: list[_Step], message: Mapping[str, Any], role: str) -> None:
    raw_content = message.get("content")
    if _has_strands_tool_blocks(raw_content):
        _add_strands_message(steps, message, role, raw_content)
        return
    reasoning = _reasoning_text(message.get("reasoning_content"))
    calls = _convert_tool_calls(message.get("tool_calls"))
    _add_step(steps, message, role, flatten_content(raw_content), reasoning, calls)


def _add_step(
    steps: list[_Step],
    message: Mapping[str, Any],
    role: str,
    content: str,
    reasoning: str | None,
    calls: list[dict[str, Any]],
) -> None:
    source = _ROLE_TO_SOURCE.get(role)

    if source == "agent":
        if steps and steps[-1].awaiting_output:
            # A Responses "reasoning" item opened this turn; the message completes it.
            step = steps[-1]
            step.awaiting_output = False
            step.message = content
            if reasoning is not None:
                step.reasoning_content = reasoning
            step.tool_calls.extend(calls)
        else:
            step = _Step(
                source="agent",
                message=content,
                timestamp=message_timestamp(message),
                reasoning_content=reasoning,
                tool_calls=calls,
            )
            steps.append(step)
        step.model_name = _model_name(message) or step.model_name
        step.metrics = _metrics(message) or step.metrics
        return

    step = _Step(source=source or "user", message=content, timestamp=message_timestamp(message))
    if source is None:
        step.add_extra("original_role", role)
    # ATIF allows these on agent steps only: keep them, but out of the typed fields.
    if reasoning is not None:
        step.add_extra("reasoning_content", reasoning)
    if calls:
        step.add_extra("tool_calls", calls)
    steps.append(step)


def _has_strands_tool_blocks(content: Any) -> TypeGuard[list[Any]]:
    return isinstance(content, list) and any(
        isinstance(block, Mapping)
        and "type" not in block
        and ("toolUse" in block or "toolResult" in block)
        for block in content
    )


def _add_strands_message(
    steps: list[_Step], message: Mapping[str, Any], role: str, blocks: list[Any]
) -> None:
    """Native Strands content: ``toolUse`` blocks are calls, ``toolResult`` blocks results."""
    calls: list[dict[str, Any]] = []
    results: list[Mapping[str, Any]] = []
    reasoning: list[str] = []
    rest: list[Any] = []
    for block in blocks:
        tool_use = block.get("toolUse") if isinstance(block, Mapping) else None
        tool_result = block.get("toolResult") if isinstance(block, Mapping) else None
        thought = block.get("reasoningContent") if isinstance(block, Mapping) else None
        if isinstance(tool_use, Mapping):
            call_id, name = tool_use.get("toolUseId"), tool_use.get("name")
            calls.append(_tool_call(call_id, name, tool_use.get("input"), index=len(calls)))
        elif isinstance(tool_result, Mapping):
            results.append(tool_result)
        elif isinstance(thought, Mapping):
            text = thought.get("reasoningText")
            text = text.get("text") if isinstance(text, Mapping) else None
            reasoning.append(text if isinstance(text, str) else _json_text(thought))
        else:
            rest.append(block)
    for tool_result in results:
        status = tool_result.get("status")
        _fold_result(
            steps,
            tool_result.get("toolUseId"),
            tool_result.get("content"),
            role=role or "toolResult",
            extra={"status": status} if status not in (None, "success") else None,
        )
    if rest or calls or reasoning or not results:
        own = _reasoning_text(message.get("reasoning_content"))
        thoughts = "\n".join(reasoning) if reasoning else own
        _add_step(steps, message, role, flatten_content(rest), thoughts, calls)


def _add_responses_call(steps: list[_Step], item: Mapping[str, Any]) -> None:
    # A call belongs to the last agent step until results arrive.
    if not (steps and steps[-1].source == "agent" and steps[-1].results is None):
        steps.append(_Step(source="agent", message="", timestamp=message_timestamp(item)))
    step = steps[-1]
    step.awaiting_output = False
    call_id = item.get("call_id") or item.get("id")
    step.tool_calls.append(
        _tool_call(call_id, item.get("name"), item.get("arguments"), index=len(step.tool_calls))
    )


def _add_responses_reasoning(steps: list[_Step], item: Mapping[str, Any]) -> None:
    parts = item.get("summary") or item.get("content")
    step = _Step(
        source="agent",
        message="",
        reasoning_content=flatten_content(parts) if parts else "",
        timestamp=message_timestamp(item),
        awaiting_output=True,
    )
    steps.append(step)


def _add_unknown_item(steps: list[_Step], item: Mapping[str, Any], kind: str) -> None:
    # An item type we do not model (web search, computer call, ...): keep all of it.
    step = _Step(source="user", message=_json_text(item), timestamp=message_timestamp(item))
    step.add_extra("original_type", kind)
    steps.append(step)


def _fold_result(
    steps: list[_Step],
    call_id: Any,
    content: Any,
    *,
    role: str,
    extra: dict[str, Any] | None = None,
) -> None:
    target = steps[-1] if steps and steps[-1].source == "agent" else None
    known = {call["tool_call_id"] for call in target.tool_calls} if target else set()
    # ATIF requires source_call_id to name a tool call of the same step.
    matched = call_id is not None and str(call_id) in known
    result: dict[str, Any] = {}
    if matched:
        result["source_call_id"] = str(call_id)
    result["content"] = flatten_content(content)
    if not matched and call_id is not None:
        extra = {"tool_call_id": call_id, **(extra or {})}
    if extra:
        result["extra"] = extra

    if target is None:
        orphan = _Step(source="system", message="", results=[result])
        orphan.add_extra("original_role", role)
        steps.append(orphan)
        return
    if target.results is None:
        target.results = [result]
    else:
        target.results.append(result)


def _convert_tool_calls(raw: Any) -> list[dict[str, Any]]:
    if not raw or isinstance(raw, str | bytes | Mapping) or not isinstance(raw, Sequence):
        return []
    calls: list[dict[str, Any]] = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            continue
        function = item.get("function")
        # Chat shape nests name/arguments under "function"; some emitters flatten them.
        source = function if isinstance(function, Mapping) else item
        call_id = item.get("id") or item.get("call_id")
        calls.append(_tool_call(call_id, source.get("name"), source.get("arguments"), index=index))
    return calls


def _tool_call(call_id: Any, name: Any, arguments: Any, *, index: int) -> dict[str, Any]:
    return {
        "tool_call_id": str(call_id) if call_id else f"call_{index}",
        "function_name": str(name) if name else "unknown",
        "arguments": parse_arguments(arguments),
    }


def _reject_constant(token: str) -> Any:
    raise ValueError(f"non-finite number {token} in tool arguments")


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise ValueError(f"number {token} overflows a float")
    return value


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as an object: ``{}`` when empty, ``{"_raw": text}`` otherwise unusable.

    ``NaN``/``Infinity`` literals count as invalid JSON, so the text is kept verbatim
    rather than producing a document that cannot be encoded.
    """
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, bytes | bytearray):
        raw = raw.decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        return {"_raw": _json_text(raw)}
    if not raw.strip():
        return {}
    try:
        parsed = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)
    except ValueError:
        return {"_raw": raw}
    return parsed if isinstance(parsed, dict) else {"_raw": raw}


def flatten_content(content: Any) -> str:
    """Message content as text: text parts joined by newlines, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        # A trajectory keeps reasoning summaries as text too.
        texts = [text for part in content if (text := part_text(part, reasoning=True)) is not None]
        if len(texts) == len(content):
            return "\n".join(texts)
    return _json_text(content)


def _json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)


def _reasoning_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return _json_text(value)


def _iso(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        if not math.isfinite(value):
            return None
        seconds = value / 1000 if abs(value) > _EPOCH_MILLIS_THRESHOLD else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC).isoformat()
        except (OSError, OverflowError, ValueError):
            return None
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        # Naive times are kept as written: guessing a zone would invent information.
        return parsed.astimezone(UTC).isoformat() if parsed.tzinfo else parsed.isoformat()
    return None


def message_timestamp(message: Mapping[str, Any]) -> str | None:
    """The message's own time as ISO 8601, from the first usable timestamp field."""
    values = [message.get(key) for key in _TIMESTAMP_KEYS]
    extra = message.get("extra")
    if isinstance(extra, Mapping):
        values.append(extra.get("timestamp"))
    return next((stamp for value in values if (stamp := _iso(value)) is not None), None)


def _response(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    extra = message.get("extra")
    response = extra.get("response") if isinstance(extra, Mapping) else None
    return response if isinstance(response, Mapping) else None


def _model_name(message: Mapping[str, Any]) -> str | None:
    model = message.get("model") or message.get("model_name")
    if not model:
        response = _response(message)
        model = response.get("model") if response else None
    return str(model) if model else None


def _token_count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _first_present(usage: Mapping[str, Any], *keys: str) -> Any:
    # "is None", not "or": a genuine 0 must not fall through to the other API's name.
    for key in keys:
        value = usage.get(key)
        if value is not None:
            return value
    return None


def _metrics(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """ATIF metrics from inline usage; malformed fields are dropped one by one."""
    usage = message.get("usage")
    if not isinstance(usage, Mapping):
        response = _response(message)
        usage = response.get("usage") if response else None
        if not isinstance(usage, Mapping):
            return None

    cached = usage.get("cached_tokens")
    for key in ("prompt_tokens_details", "input_tokens_details"):
        details = usage.get(key)
        if cached is None and isinstance(details, Mapping):
            cached = details.get("cached_tokens")

    metrics: dict[str, Any] = {}
    for name, value in (
        ("prompt_tokens", _first_present(usage, "prompt_tokens", "input_tokens")),
        ("completion_tokens", _first_present(usage, "completion_tokens", "output_tokens")),
        ("cached_tokens", cached),
    ):
        count = _token_count(value)
        if count is not None:
            metrics[name] = count
    cost = usage.get("cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost):
        metrics["cost_usd"] = float(cost)
    details_extra = {
        key: dict(value)
        for key in _USAGE_DETAIL_KEYS
        if isinstance(value := usage.get(key), Mapping) and value
    }
    if details_extra:
        metrics["extra"] = details_extra
    return metrics or None
