"""The cassette file format (version 1), as pydantic models: what :class:`RecordingPolicy` reads.

A file holds the recorded calls of one dataset row and attempt::

    {"version": 1, "row_key": "row-1", "attempt": 0,
     "interactions": [{"key": ..., "request": {"messages", "tools", "params"},
                       "response": {"content", "tool_calls", "finish_reason", "usage"}}]}

Validation is strict (no unknown keys, no type coercion), so a hand-edited or truncated
cassette fails when it is read, with the file and the field, instead of replaying something else.
:func:`read_cassette` raises :class:`~osmosis_rollout.errors.CassetteFileError`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from osmosis_rollout.errors import CassetteFileError
from osmosis_rollout.policy.types import ChatReply, ToolCall, Usage

__all__ = [
    "CASSETTE_VERSION",
    "CassetteDocument",
    "CassetteInteraction",
    "CassetteRequest",
    "CassetteResponse",
    "CassetteToolCall",
    "CassetteUsage",
    "read_cassette",
]

CASSETTE_VERSION = 1

_FIX = (
    "re-record it (mode 'all', or delete the file and record with 'once'), or correct the "
    "field by hand"
)
_MAX_ERRORS = 5


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class CassetteToolCall(_Strict):
    """A tool call in a recorded reply; ``arguments`` as a dict or an encoded JSON string."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None


class CassetteUsage(_Strict):
    """The recorded reply's token counts (``estimated`` when counted by us, not the model)."""

    prompt_tokens: int = Field(ge=0)
    completion_tokens: int = Field(ge=0)
    total_tokens: int | None = Field(default=None, ge=0)
    estimated: bool = False


class CassetteResponse(_Strict):
    """A recorded reply (:meth:`ChatReply.to_dict`'s shape)."""

    content: str | None = None
    tool_calls: list[CassetteToolCall] = Field(default_factory=list)
    finish_reason: str = "stop"
    usage: CassetteUsage | None = None

    def to_reply(self) -> ChatReply:
        """The :class:`ChatReply` this recording replays."""
        usage = self.usage
        return ChatReply(
            content=self.content,
            tool_calls=[ToolCall(call.name, call.arguments, call.id) for call in self.tool_calls],
            finish_reason=self.finish_reason,
            usage=None
            if usage is None
            else Usage(usage.prompt_tokens, usage.completion_tokens, usage.estimated),
        )


class CassetteRequest(_Strict):
    """The normalised request a recording answers (what its ``key`` hashes)."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)


class CassetteInteraction(_Strict):
    """One recorded call: the request's key, the normalised request and the reply."""

    key: str = Field(min_length=1)
    request: CassetteRequest
    response: CassetteResponse


class CassetteDocument(_Strict):
    """A whole cassette file."""

    version: Literal[1]
    row_key: str | None = None
    attempt: int = Field(default=0, ge=0)
    interactions: list[CassetteInteraction]


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "(the document)"


def read_cassette(path: Path) -> CassetteDocument:
    """Read and validate the cassette at ``path``.

    Raises :class:`CassetteFileError` naming the file, and each bad field with what was
    expected, when it cannot be read, is not JSON or does not match the format.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CassetteFileError(f"cannot read cassette {path}: {exc}") from exc
    except ValueError as exc:
        raise CassetteFileError(
            f"cassette {path} is not valid JSON: {exc}.\n  fix: {_FIX}"
        ) from exc
    try:
        return CassetteDocument.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"  {_location(error['loc'])}: {error['msg']}"
            for error in exc.errors(include_url=False)[:_MAX_ERRORS]
        ]
        more = exc.error_count() - len(problems)
        if more > 0:
            problems.append(f"  ... and {more} more")
        raise CassetteFileError(
            f"cassette {path} does not match the cassette format (version "
            f"{CASSETTE_VERSION}):\n" + "\n".join(problems) + f"\n  fix: {_FIX}"
        ) from None
