"""Record any policy's calls into JSON cassettes and replay them with no network and no keys.

Layout: one file per (dataset row, attempt) so a single row can be re-recorded alone::

    <cassette_dir>/<row_key>/attempt-<n>.json      # requests bound to a dataset row
    <cassette_dir>/<namespace>/<key>/attempt-<n>.json   # row_key "<namespace>::<key>"
    <cassette_dir>/_unkeyed/<conversation>.json    # requests without a row_key

A row key may name a namespace before ``::`` (the plugin uses the dataset's path relative to
the rootdir, so two datasets with one file name never share a folder); its ``/``-separated
parts become nested folders. Each folder name is made safe (unsafe characters become ``_``
plus a short hash), so every cassette stays inside ``cassette_dir``.

A file is ``{"version": 1, "row_key": ..., "attempt": ..., "interactions": [...]}``; each
interaction is ``{"key", "request": {"messages", "tools", "params"}, "response": ChatReply}``
(JSON, indent 2, sorted keys, so diffs read well). Files are read through the models of
:mod:`osmosis_rollout.policy.cassette`: a malformed one raises
:class:`~osmosis_rollout.errors.CassetteFileError` naming the file and the field. The key hashes the normalised request:
messages, tools and sampling parameters, with tool call ids renamed by order of appearance and
no rollout ids, keys or timestamps. Keys named ``api_key``/``authorization`` and any string equal
to a secret from the environment are never written.

Modes (as in pytest-recording / VCR.py):

- ``none``: replay only; a call with no recording raises :class:`CassetteMissError`;
- ``once``: replay a cassette that exists; record a whole cassette that does not;
- ``new_episodes``: replay what is recorded, record what is not;
- ``all``: call the inner policy every time and re-record every cassette it touches.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from osmosis_rollout._internal.atomic import write_text_atomic
from osmosis_rollout.errors import CassetteMissError
from osmosis_rollout.policy.cassette import CASSETTE_VERSION, read_cassette
from osmosis_rollout.policy.types import ChatReply, ChatRequest, Policy, coerce_reply

__all__ = [
    "CASSETTE_VERSION",
    "NAMESPACE_SEPARATOR",
    "RecordMode",
    "RecordingPolicy",
    "cassette_path",
    "known_secrets",
    "normalise_request",
    "row_folder",
]

RecordMode = Literal["none", "once", "new_episodes", "all"]

#: Params that do not change what a model answers (bookkeeping, transport, credentials).
_IGNORED_PARAMS = frozenset(
    {
        "user",
        "metadata",
        "store",
        "timeout",
        "extra_headers",
        "service_tier",
        "prompt_cache_key",
        "safety_identifier",
        "api_key",
        "authorization",
        "api_base",
        "base_url",
    }
)
_SECRET_KEYS = frozenset({"api_key", "api-key", "x-api-key", "authorization"})
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
_REDACTED = "[REDACTED]"


def _digest(obj: Any, length: int = 20) -> str:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def _normalise_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    ids: dict[str, str] = {}

    def canonical(call_id: Any) -> Any:
        if not isinstance(call_id, str):
            return call_id
        if call_id not in ids:
            ids[call_id] = f"call_{len(ids)}"
        return ids[call_id]

    out: list[dict[str, Any]] = []
    for message in messages:
        item = {k: v for k, v in message.items() if k != "id"}
        if item.get("tool_calls"):
            calls = []
            for call in item["tool_calls"]:
                if not isinstance(call, Mapping):
                    calls.append(call)
                    continue
                norm = {k: v for k, v in call.items() if k != "index"}
                norm["id"] = canonical(call.get("id"))
                calls.append(norm)
            item["tool_calls"] = calls
        if "tool_call_id" in item:
            item["tool_call_id"] = canonical(item["tool_call_id"])
        item.setdefault("content", None)
        out.append(item)
    return out


def normalise_request(request: ChatRequest) -> dict[str, Any]:
    """The part of a request that decides the reply: ``{"messages", "tools", "params"}``."""
    return {
        "messages": _normalise_messages(request.messages),
        "tools": list(request.tools),
        "params": {k: v for k, v in request.params.items() if k not in _IGNORED_PARAMS},
    }


def _safe_segment(value: str) -> str:
    safe = _UNSAFE.sub("_", value)[:80]
    if safe != value or safe in {"", ".", ".."}:
        safe = f"{safe.strip('.') or 'row'}-{_digest(value, 8)}"
    return safe


def _conversation_key(request: ChatRequest) -> str:
    """Hash of the conversation's opening (up to the first user message) and tools."""
    messages = _normalise_messages(request.messages)
    opening: list[dict[str, Any]] = []
    for message in messages:
        opening.append(message)
        if message.get("role") == "user":
            break
    return _digest({"opening": opening, "tools": request.tools}, 16)


NAMESPACE_SEPARATOR = "::"
"""Separates a row key's namespace (nested folders) from the row's own key."""


def row_folder(cassette_dir: Path, row_key: str) -> Path:
    """The folder holding the cassettes of ``row_key`` (see the module docstring)."""
    namespace, separator, key = row_key.partition(NAMESPACE_SEPARATOR)
    if not separator:
        return cassette_dir / _safe_segment(row_key)
    parts = [_safe_segment(part) for part in namespace.split("/")]
    return cassette_dir.joinpath(*parts, _safe_segment(key))


def cassette_path(cassette_dir: Path, request: ChatRequest) -> Path:
    """Where the cassette for ``request`` lives (see the module docstring for the layout)."""
    if request.row_key is not None:
        return row_folder(cassette_dir, request.row_key) / f"attempt-{request.attempt}.json"
    suffix = "" if request.attempt == 0 else f".attempt-{request.attempt}"
    return cassette_dir / "_unkeyed" / f"{_conversation_key(request)}{suffix}.json"


def _scrub(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, _REDACTED)
        return value
    if isinstance(value, Mapping):
        return {
            k: _scrub(v, secrets) for k, v in value.items() if str(k).lower() not in _SECRET_KEYS
        }
    if isinstance(value, list | tuple):
        return [_scrub(v, secrets) for v in value]
    return value


def known_secrets(extra: Iterable[str | None] = ()) -> tuple[str, ...]:
    """The values of environment variables named like a secret (KEY, TOKEN, SECRET or PASSWORD
    in the name, 8 characters or more) and the ``extra`` strings, longest first."""
    values = {
        value for name, value in os.environ.items() if _SECRET_NAME.search(name) and len(value) >= 8
    }
    values.update(value for value in extra if value)
    return tuple(sorted(values, key=len, reverse=True))


def _short(value: Any, limit: int = 400) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class _Cassette:
    path: Path
    row_key: str | None
    attempt: int
    existed: bool
    interactions: list[dict[str, Any]] = field(default_factory=list)
    by_key: dict[str, list[int]] = field(default_factory=dict)

    def add(self, interaction: dict[str, Any]) -> None:
        self.by_key.setdefault(interaction["key"], []).append(len(self.interactions))
        self.interactions.append(interaction)


class RecordingPolicy:
    """Wrap ``inner`` to record its replies into cassettes under ``cassette_dir``, or replay them.

    ``inner`` may be None for pure replay (``mode="none"``). ``secrets`` adds strings that must
    never reach a cassette, on top of every environment value whose name holds KEY, TOKEN, SECRET
    or PASSWORD. ``on_write_failure(path, exc)``, when given, is told of a cassette that could
    not be written (a full disk) and the model's reply is still returned: the caller, not the
    rollout, owns that failure. Without it the ``OSError`` propagates to the model call.
    """

    def __init__(
        self,
        inner: Any | None,
        cassette_dir: str | Path,
        mode: RecordMode = "once",
        *,
        secrets: Iterable[str] = (),
        on_write_failure: Callable[[Path, OSError], None] | None = None,
    ) -> None:
        if mode not in get_args(RecordMode):
            raise ValueError(
                f"unknown record mode {mode!r}; expected one of {', '.join(get_args(RecordMode))}"
            )
        if inner is None and mode == "all":
            raise ValueError("record mode 'all' needs an inner policy to record from")
        from osmosis_rollout.policy.scripted import as_policy

        self.inner: Policy | None = None if inner is None else as_policy(inner)
        self.cassette_dir = Path(cassette_dir)
        self.mode: RecordMode = mode
        self._extra_secrets = {s for s in secrets if s}
        self.on_write_failure = on_write_failure
        self._cassettes: dict[Path, _Cassette] = {}
        self._served: dict[str, dict[str, int]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RecordingPolicy({self.inner!r}, {str(self.cassette_dir)!r}, mode={self.mode!r})"

    # -- cassettes ---------------------------------------------------------------------

    def _load(self, path: Path, request: ChatRequest) -> _Cassette:
        cassette = self._cassettes.get(path)
        if cassette is not None:
            return cassette
        existed = path.is_file()
        cassette = _Cassette(path, request.row_key, request.attempt, existed)
        if existed and self.mode != "all":
            for interaction in read_cassette(path).interactions:
                cassette.add(interaction.model_dump(mode="json", exclude_unset=True))
        self._cassettes[path] = cassette
        return cassette

    def _write(self, cassette: _Cassette) -> None:
        document = {
            "version": CASSETTE_VERSION,
            "row_key": cassette.row_key,
            "attempt": cassette.attempt,
            "interactions": cassette.interactions,
        }
        text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        write_text_atomic(cassette.path, text)

    # -- the policy ----------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> ChatReply:
        """Replay a recording of ``request`` or record the inner policy's reply, per the mode."""
        path = cassette_path(self.cassette_dir, request)
        normalised = normalise_request(request)
        key = _digest(normalised)
        with self._lock:
            cassette = self._load(path, request)
            if self.mode != "all":
                hit = self._replay(cassette, key, request.rollout_id)
                if hit is not None:
                    return hit
                if self.mode == "none" or (self.mode == "once" and cassette.existed):
                    raise self._miss(cassette, normalised, request)
        if self.inner is None:
            raise self._miss(cassette, normalised, request)
        reply = coerce_reply(await self.inner.complete(request))
        secrets = known_secrets(self._extra_secrets)
        interaction = {
            "key": key,
            "request": _scrub(normalised, secrets),
            "response": _scrub(reply.to_dict(), secrets),
        }
        with self._lock:
            cassette.add(interaction)
            served = self._served.setdefault(request.rollout_id, {})
            served[key] = served.get(key, 0) + 1
            try:
                self._write(cassette)
            except OSError as exc:
                if self.on_write_failure is None:
                    raise
                self.on_write_failure(cassette.path, exc)
        return reply

    def _replay(self, cassette: _Cassette, key: str, rollout_id: str) -> ChatReply | None:
        indices = cassette.by_key.get(key)
        if not indices:
            return None
        served = self._served.setdefault(rollout_id, {})
        n = served.get(key, 0)
        served[key] = n + 1
        interaction = cassette.interactions[indices[min(n, len(indices) - 1)]]
        return ChatReply.from_dict(cast(Mapping[str, Any], interaction["response"]))

    def forget(self, rollout_id: str) -> None:
        """Drop per-rollout replay positions (called when the endpoint releases a rollout)."""
        with self._lock:
            self._served.pop(rollout_id, None)
        forget = getattr(self.inner, "forget", None)
        if callable(forget):
            forget(rollout_id)

    def _miss(
        self, cassette: _Cassette, normalised: dict[str, Any], request: ChatRequest
    ) -> CassetteMissError:
        who = f"rollout {request.rollout_id!r}"
        if request.row_key is not None:
            who += f" (row {request.row_key!r}, attempt {request.attempt})"
        head = f"no recording for a call of {who} in cassette {cassette.path} (mode {self.mode!r})"
        fix = (
            "re-record with mode 'new_episodes' (record what is missing) or 'all' "
            "(re-record everything)"
        )
        if self.inner is None and self.mode != "none":
            fix = "there is no inner policy to record from; " + fix
        if not cassette.interactions:
            reason = "the cassette file does not exist" if not cassette.existed else "it is empty"
            return CassetteMissError(f"{head}: {reason}.\n  fix: {fix}")
        difference = _nearest_difference(
            [i["request"] for i in cassette.interactions],
            _scrub(normalised, known_secrets(self._extra_secrets)),
        )
        return CassetteMissError(f"{head}; {difference}\n  fix: {fix}")


def _common_prefix(a: list[Any], b: list[Any]) -> int:
    """How many leading items ``a`` and ``b`` share."""
    unequal = (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
    return next(unequal, min(len(a), len(b)))


def _nearest_difference(recorded: list[dict[str, Any]], now: dict[str, Any]) -> str:
    """Describe where ``now`` first differs from the most similar recorded request."""
    messages = now["messages"]

    def score(candidate: dict[str, Any]) -> tuple[int, int, int]:
        theirs = candidate.get("messages", [])
        return (
            _common_prefix(theirs, messages),
            int(candidate.get("tools") == now["tools"]),
            -abs(len(theirs) - len(messages)),
        )

    nearest = max(recorded, key=score)
    theirs = nearest.get("messages", [])
    index = _common_prefix(theirs, messages)
    if index < len(theirs) or index < len(messages):
        was = theirs[index] if index < len(theirs) else "(no message)"
        got = messages[index] if index < len(messages) else "(no message)"
        return (
            f"the nearest recording differs at messages[{index}]:\n"
            f"  recorded: {_short(was)}\n"
            f"  now:      {_short(got)}"
        )
    if nearest.get("tools") != now["tools"]:
        return (
            "the nearest recording has the same messages but different tools:\n"
            f"  recorded: {_short(nearest.get('tools'))}\n"
            f"  now:      {_short(now['tools'])}"
        )
    was_params, now_params = nearest.get("params", {}), now["params"]
    keys = sorted(
        k for k in set(was_params) | set(now_params) if was_params.get(k) != now_params.get(k)
    )
    return (
        f"the nearest recording has the same messages and tools but different params {keys}:\n"
        f"  recorded: {_short({k: was_params.get(k) for k in keys})}\n"
        f"  now:      {_short({k: now_params.get(k) for k in keys})}"
    )
