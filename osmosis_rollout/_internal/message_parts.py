"""The content parts of a message that carry text, in every shape a rollout sample can hold.

One vocabulary for everything that reads message text (the grader helpers in
:mod:`osmosis_rollout.sample_text`, the trajectory converter):

- a plain string part is text;
- a typed part is text when its ``type`` is in :data:`TEXT_PART_TYPES` (OpenAI chat and
  LiteLLM ``text``, Responses/Agents SDK ``input_text`` and ``output_text``);
- reasoning summaries (:data:`REASONING_TEXT_PART_TYPES`) carry text but are not the
  message's answer: only readers that keep everything (a trajectory) count them;
- a Strands text block is ``{"text": ...}`` alone, with no ``type``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})
"""Typed content parts whose ``text`` is the message's text."""

REASONING_TEXT_PART_TYPES = frozenset({"summary_text"})
"""Typed content parts whose ``text`` is reasoning, not the answer."""


def part_text(part: Any, *, reasoning: bool = False) -> str | None:
    """The text ``part`` carries, or ``None`` when it carries none (tool calls, images, ...).

    ``reasoning=True`` counts reasoning summaries as text too.
    """
    if isinstance(part, str):
        return part
    if not isinstance(part, Mapping):
        return None
    text = part.get("text")
    if not isinstance(text, str):
        return None
    kind = part.get("type")
    if kind is None:
        return text if len(part) == 1 else None
    if kind in TEXT_PART_TYPES or (reasoning and kind in REASONING_TEXT_PART_TYPES):
        return text
    return None


__all__ = ["REASONING_TEXT_PART_TYPES", "TEXT_PART_TYPES", "part_text"]
