"""A deterministic reference policy for the multiply-openai rollout: no model, no API key.

It answers like a model that uses the multiply tool correctly: the first call returns a
tool call ``multiply(a, b)`` with the first two integers of the user's prompt; once the
tool result is in the conversation, it answers with the product as text. Pass it to the
plugin with ``--osmosis-policy rollouts/multiply-openai/policy.py:policy``.
"""

from __future__ import annotations

import re
from typing import Any

from osmosis_rollout.policy import ChatRequest, Text, ToolCall

_INTEGER = re.compile(r"-?\d+")


def _text(content: Any) -> str:
    """A message's text, whether its content is a string or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def policy(request: ChatRequest) -> Text | ToolCall:
    """Call ``multiply`` with the prompt's two numbers, then report the tool's result."""
    results = [m for m in request.messages if m.get("role") == "tool"]
    if results:
        product = _INTEGER.findall(_text(results[-1].get("content")))
        return Text(f"The product is {product[0]}." if product else "I could not multiply.")
    numbers = _INTEGER.findall(request.last_user_message or "")
    if len(numbers) < 2:
        return Text("Please give me two integers to multiply.")
    return ToolCall("multiply", {"a": int(numbers[0]), "b": int(numbers[1])})
