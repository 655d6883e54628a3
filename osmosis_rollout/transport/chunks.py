"""A streamed chat completion's chunks, folded into the parts of one reply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["StreamFold"]


@dataclass
class StreamFold:
    """``chat.completion.chunk`` dicts folded into one reply's parts, tool-call deltas too.

    Shared by :class:`~osmosis_rollout.chat_client.RolloutChatClient` and the policy's
    OpenAI-compatible client, each building its own reply from the parts.
    """

    role: str = "assistant"
    role_seen: bool = False
    saw_choice: bool = False
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Any = None

    def add(self, chunk: Any) -> None:
        """Fold in one chunk (anything but a dict is skipped)."""
        if not isinstance(chunk, dict):
            return
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for choice in chunk.get("choices") or ():
            self.saw_choice = True
            delta = choice.get("delta") or {}
            self.role_seen = self.role_seen or "role" in delta
            self.role = delta.get("role") or self.role
            if isinstance(delta.get("content"), str):
                self.content.append(delta["content"])
            if isinstance(delta.get("reasoning_content"), str) and delta["reasoning_content"]:
                self.reasoning.append(delta["reasoning_content"])
            for part in delta.get("tool_calls") or ():
                call = self.calls.setdefault(
                    part.get("index", len(self.calls)),
                    {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
                )
                if part.get("id"):
                    call["id"] = part["id"]
                function = part.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
            self.finish_reason = choice.get("finish_reason") or self.finish_reason

    def text(self) -> str | None:
        """The content deltas joined (``None`` when there were none)."""
        return "".join(self.content) or None
