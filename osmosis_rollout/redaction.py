"""One redaction step for everything a run writes: secret values become ``[REDACTED:NAME]``.

Which values are secret: those of environment variables named like credentials (``*_KEY``,
which takes in ``*_API_KEY``, ``*_ACCESS_KEY`` and ``AZURE_OPENAI_KEY``; ``*_TOKEN``,
``*_SECRET``, ``*_PASSWORD``; this covers provider keys such as ``OPENAI_API_KEY`` and the
rollout server's inbound ``OSMOSIS_ROLLOUT_API_KEY``), plus values registered by name, such as
the policy endpoint's bearer key. Each occurrence is replaced by a marker naming where the
value came from, so a reader can still tell which key a message was about. Credentials in a
URL (``https://user:pass@host``) become ``https://***@host`` whatever they are.

A rollout server is handed a new key with every rollout (``llm_api_key``): too many for one
pattern. :class:`LiveRedactor` holds them in an index whose cost per text does not grow with
their number, and :func:`redact_std_streams` puts the redactor in front of what the process
prints. It also redacts a key handed to it (each rollout's, and the server's own secrets)
base64- or URL-encoded (:func:`encoded_forms`): a workflow that logs an ``Authorization:
Basic`` header or a URL with the key in its query would otherwise write it out.

Code that builds a redactor per write (a trajectory per rollout) uses
:func:`environment_redactor`: the same secrets, shared and rebuilt only when the
environment's secret values change.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self
from urllib.parse import quote, quote_plus

__all__ = [
    "MIN_SECRET_LENGTH",
    "SECRET_NAME",
    "URL_CREDENTIALS",
    "LiveRedactor",
    "RedactingFormatter",
    "RedactingStream",
    "Redactor",
    "encoded_forms",
    "environment_redactor",
    "redact_all_handlers",
    "redact_handler",
    "redact_std_streams",
    "redact_url",
]

SECRET_NAME = re.compile(r"(?:^|_)(?:KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
"""Environment variable names whose values are treated as secrets."""

URL_CREDENTIALS = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://)(?!\*\*\*@)[^\s/?#@\"'<>\\]+@")
"""The userinfo of a URL (``scheme://user:pass@``); one already redacted is left alone."""

_DERIVED_TAIL = r"(?:\.[A-Za-z0-9_\-]+)?"
"""What follows a family's prefix in a key derived from it (see :meth:`Redactor.add_family`)."""

URL_MASK = "***"
"""What a URL's userinfo becomes."""


def redact_url(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced by ``***``."""
    return text if "://" not in text else URL_CREDENTIALS.sub(rf"\1{URL_MASK}@", text)


MIN_SECRET_LENGTH = 8
"""Shorter values are not redacted (too likely to occur by chance)."""


_URL_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*")


def encoded_forms(value: str) -> list[str]:
    """How ``value`` reads base64-encoded (standard and URL-safe alphabets, padded or not, and
    the part any longer base64 text holding it shows at each of the three byte alignments)
    and URL-encoded; those at least :data:`MIN_SECRET_LENGTH` long and unlike ``value``."""
    raw = value.encode()
    # Most keys are all unreserved characters, which URL-encoding leaves as they are.
    forms = (
        set()
        if _URL_UNRESERVED.fullmatch(value)
        else {quote(value, safe=""), quote(value), quote_plus(value)}
    )
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        forms.update((whole, whole.rstrip("=")))
        for offset in range(3):
            # Inside a longer text the first characters also carry the bytes before it, and
            # the last ones the bytes after: only those made of the value's bits alone stay.
            text = encode(b"\0" * offset + raw).decode()
            first = -(-8 * offset // 6)  # the first character with no bit from before
            forms.add(text[first : 8 * (offset + len(raw)) // 6])
    forms.discard(value)
    return sorted(f for f in forms if len(f) >= MIN_SECRET_LENGTH)


_JSON_ESCAPED = re.compile(r'["\\\x00-\x1f]')
"""What ``json.dumps(ensure_ascii=False)`` escapes in a string: a quote, a backslash, a control
character; a secret with none of them appears in JSON text as it is."""

_ATOMS = frozenset({int, float, bool, type(None)})
"""Exact types a JSON-like walk returns as they are."""


def _snapshot(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``environ``, retried while another thread changes it (pytest sets and deletes
    ``PYTEST_CURRENT_TEST`` around every item), which raises ``KeyError`` or ``RuntimeError``."""
    for _ in range(100):
        try:
            return dict(environ)
        except (KeyError, RuntimeError):
            continue
    return dict(environ)


class Redactor:
    """Replaces known secret values in text and in JSON-like values.

    Thread-safe for readers: :meth:`add` builds a new pattern and swaps it in one assignment,
    so a log record formatted on another thread sees either the old or the new set.
    """

    def __init__(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        """``secrets`` maps a name (shown in the marker) to its value."""
        self._names: dict[str, str] = {}
        self._families: dict[str, str] = {}
        """Prefix -> name: the prefix and every key derived from it (``prefix.<token>``)."""
        self._pattern: re.Pattern[str] | None = None
        self._shortest = MIN_SECRET_LENGTH
        self._verbatim_in_json = True
        """Whether every secret is written by JSON as it is (nothing in it gets escaped)."""
        pairs = secrets.items() if isinstance(secrets, Mapping) else secrets
        for name, value in pairs:
            self._remember(name, value)
        self._compile()

    @classmethod
    def from_environment(
        cls,
        environ: Mapping[str, str] | None = None,
        *,
        extra: Mapping[str, str | None] | None = None,
    ) -> Self:
        """Secrets of ``environ`` (default ``os.environ``) plus ``extra`` (name -> value)."""
        env = _snapshot(os.environ) if environ is None else environ
        return cls(_environment_pairs(env, extra))

    def _remember(self, name: str, value: str | None) -> bool:
        if not value or len(value) < MIN_SECRET_LENGTH or value in self._names:
            return False
        self._names[value] = name
        return True

    def _compile(self) -> None:
        if not self._names and not self._families:
            self._pattern = None
            return
        # Longest first, so a key that contains another is replaced whole; a family first,
        # so a derived key is replaced with its token.
        alternatives = sorted(self._names, key=len, reverse=True)
        families = sorted(self._families, key=len, reverse=True)
        # Shortest and verbatim before pattern: a reader on another thread never skips a text
        # the new pattern must see (secrets are only added, so both only ever go down).
        self._shortest = min(len(v) for v in (*alternatives, *families))
        self._verbatim_in_json = self._verbatim_in_json and not any(
            _JSON_ESCAPED.search(v) for v in (*alternatives, *families)
        )
        self._pattern = re.compile(
            "|".join(
                [re.escape(f) + _DERIVED_TAIL for f in families]
                + [re.escape(v) for v in alternatives]
            )
        )

    def _name_of(self, found: str) -> str:
        name = self._names.get(found)
        if name is not None:
            return name
        families = self._families.items()
        return next((family for prefix, family in families if found.startswith(prefix)), "SECRET")

    def add(self, name: str, value: str | None) -> None:
        """Treat ``value`` as a secret shown as ``[REDACTED:name]`` (ignored when too short)."""
        if self._remember(name, value):
            self._compile()

    def add_family(self, name: str, prefix: str) -> None:
        """Treat ``prefix`` and every key derived from it (``prefix.<token>``, as the policy
        endpoint issues one per rollout) as secrets shown as ``[REDACTED:name]``."""
        if len(prefix) < MIN_SECRET_LENGTH or prefix in self._families:
            return
        self._families[prefix] = name
        self._compile()

    @property
    def names(self) -> list[str]:
        """The names of the secrets this redactor knows (never their values)."""
        return sorted({*self._names.values(), *self._families.values()})

    def __bool__(self) -> bool:
        return self._pattern is not None

    def redact(self, text: str) -> str:
        """``text`` with every known secret replaced by ``[REDACTED:NAME]``, and the
        credentials of every URL by ``***``."""
        if "://" in text:
            text = redact_url(text)
        pattern = self._pattern
        if pattern is None or len(text) < self._shortest:
            return text  # too short to hold any secret (most strings of a report are)
        name_of = self._name_of
        return pattern.sub(lambda m: f"[REDACTED:{name_of(m.group(0))}]", text)

    def absent_from_json(self, text: str) -> bool:
        """True when no string of the JSON document ``text`` (keys included) holds a secret.

        Then :meth:`redact_value` would return the document's value unchanged, and ``text``
        can be written as it is. A secret that JSON writes verbatim appears in ``text``
        wherever a string holds it, unless an escape spells one of its characters: so
        ``False`` (redact the value) when a secret is found anywhere in ``text``, when a
        secret has a character JSON escapes, when ``text`` holds a ``\\u`` or ``\\/`` escape
        (ASCII output, or a writer that escapes ``/``), and for a subclass, whose own
        redaction must see the value.
        """
        if type(self) not in (Redactor, _SharedRedactor):
            return False
        if "://" in text and URL_CREDENTIALS.search(text) is not None:
            return False
        pattern = self._pattern
        if pattern is None:
            return True
        return (
            self._verbatim_in_json
            and "\\u" not in text
            and "\\/" not in text
            and pattern.search(text) is None
        )

    def redact_value(self, value: Any) -> Any:
        """A copy of a JSON-like ``value`` with secrets removed from every string (keys too).

        Mappings become dicts and tuples lists (their JSON form); other objects pass through.
        A redactor that knows no secret returns ``value`` itself when no URL in it holds
        credentials.
        """
        return self.redact_shared(value) if self._pattern is None else self._walk(value)

    def redact_shared(self, value: Any) -> Any:
        """Like :meth:`redact_value`, but every part with nothing to redact is ``value``'s own.

        No copy of a large document that holds no secret; the result must then be treated
        as read-only, since it shares its parts with ``value``.
        """
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            changed = not isinstance(value, dict)
            items = []
            for k, v in value.items():
                k2, v2 = self.redact_shared(k), self.redact_shared(v)
                changed = changed or k2 is not k or v2 is not v
                items.append((k2, v2))
            return dict(items) if changed else value
        if isinstance(value, list | tuple):
            walked = [self.redact_shared(v) for v in value]
            if isinstance(value, list) and all(a is b for a, b in zip(walked, value, strict=True)):
                return value
            return walked
        return value

    def _walk(self, value: Any) -> Any:
        # Exact types first: the ABC check (Mapping) is slow, and JSON-like values are plain.
        kind = type(value)
        if kind is str:
            return self.redact(value)
        if kind is dict:
            return {self._walk(k): self._walk(v) for k, v in value.items()}
        if kind is list:
            return [self._walk(v) for v in value]
        if kind in _ATOMS:
            return value
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, Mapping):
            return {self._walk(k): self._walk(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._walk(v) for v in value]
        return value


class RedactingFormatter(logging.Formatter):
    """Formats with ``inner`` (tracebacks included), then redacts the whole text."""

    def __init__(self, inner: logging.Formatter | None, redactor: Redactor) -> None:
        super().__init__()
        self.inner = inner or logging.Formatter()
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self.redactor.redact(self.inner.format(record))


class _SharedRedactor(Redactor):
    """A redactor handed to many callers: adding to it would change what the others redact."""

    def add(self, name: str, value: str | None) -> None:
        raise TypeError(
            "the environment redactor is shared and read-only; build your own with "
            "Redactor.from_environment() to add secrets to it"
        )

    def add_family(self, name: str, prefix: str) -> None:
        self.add(name, prefix)


class _EnvironmentRedactors:
    """Environment redactors (one per ``extra``), reused while the environment's secrets hold.

    Reading every variable (decoding each name and value) and compiling the pattern cost
    more than the rest of a small trajectory's write. What is compared instead: the set of
    variable names (pytest sets and deletes ``PYTEST_CURRENT_TEST`` around every item, so a
    few sets alternate; each set's secret names are remembered), then the raw values of the
    secret names only. Both are read from the environment's own storage in C, which another
    thread's set or delete cannot break mid-read.
    """

    _MAX_NAME_SETS = 8
    _MAX_EXTRAS = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secret_names: dict[frozenset[Any], tuple[Any, ...]] = {}
        self._by_extra: dict[tuple[Any, ...], tuple[tuple[Any, ...], Redactor]] = {}
        """Per ``extra``: the secret values it was built from, and the redactor."""

    def get(self, extra: Mapping[str, str | None] | None) -> Redactor:
        raw = getattr(os.environ, "_data", None)
        if not isinstance(raw, dict):
            # Not CPython's os.environ: no cheap way to tell what changed.
            return _SharedRedactor(_environment_pairs(_snapshot(os.environ), extra))
        names = frozenset(raw)
        decode_key = os.environ.decodekey  # type: ignore[attr-defined]
        with self._lock:
            secret = self._secret_names.get(names)
            if secret is None:
                if len(self._secret_names) >= self._MAX_NAME_SETS:
                    self._secret_names.clear()
                secret = tuple(sorted(n for n in names if SECRET_NAME.search(decode_key(n))))
                self._secret_names[names] = secret
            values = tuple((name, raw.get(name)) for name in secret)
            extra_key = tuple((extra or {}).items())
            cached = self._by_extra.get(extra_key)
            if cached is not None and cached[0] == values:
                return cached[1]
            if len(self._by_extra) >= self._MAX_EXTRAS:
                self._by_extra.clear()  # many distinct keys (a server's per-rollout keys)
            # Built from the very values it is cached under (a second read of the
            # environment could see another thread's change and cache a stale redactor).
            decode_value = os.environ.decodevalue  # type: ignore[attr-defined]
            current = {decode_key(n): decode_value(v) for n, v in values if v is not None}
            redactor = _SharedRedactor(_environment_pairs(current, extra))
            self._by_extra[extra_key] = (values, redactor)
            return redactor


def _environment_pairs(
    env: Mapping[str, str], extra: Mapping[str, str | None] | None
) -> list[tuple[str, str]]:
    pairs = [(name, value) for name, value in env.items() if SECRET_NAME.search(name)]
    pairs.extend((name, value) for name, value in (extra or {}).items() if value)
    return pairs


_ENVIRONMENT = _EnvironmentRedactors()


def environment_redactor(extra: Mapping[str, str | None] | None = None) -> Redactor:
    """What ``Redactor.from_environment(extra=extra)`` returns, shared while nothing changed.

    The environment is looked at on every call: a secret set in ``os.environ`` since the
    previous call (or a changed ``extra``) yields a new redactor that knows it. The result
    is shared with other callers, so it is read-only (:meth:`Redactor.add` raises
    ``TypeError``).
    """
    return _ENVIRONMENT.get(extra)


def redact_handler(handler: logging.Handler, redactor: Redactor) -> None:
    """Make ``handler`` redact what it writes (idempotent)."""
    current = handler.formatter
    if isinstance(current, RedactingFormatter):
        current.redactor = redactor
        return
    handler.setFormatter(RedactingFormatter(current, redactor))


class LiveRedactor(Redactor):
    """A :class:`Redactor` that also redacts secrets held for a while: each rollout's key.

    A rollout server is handed one ``llm_api_key`` per rollout, thousands at once: one
    alternation pattern over them all would cost a millisecond per log line. Held values
    are found another way: a text is cut into runs of the characters the held values are
    made of (one C-level pass), a run that is a held value is replaced whole, and only a
    run long enough to hold one inside it is scanned position by position.

    :meth:`hold` and :meth:`release` count references (two rollouts handed the same key keep
    it until both end). A released value stays redacted while it is among the last
    :attr:`retained` released ones, for what outlives its rollout (a thread it started).

    Held values, and the secrets given when built or by :meth:`add`, are also redacted in
    their :func:`encoded_forms` (base64, URL-encoded), found through the same index.
    """

    retained = 4096

    def __init__(self, secrets: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        """``secrets`` are redacted for good, as by :class:`Redactor`."""
        super().__init__(secrets)
        self._held_lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._retired: dict[str, None] = {}
        """Released values, oldest first (insertion order)."""
        self._live_names: dict[str, str] = {}
        self._by_prefix: dict[str, dict[int, set[str]]] = {}
        """First :data:`MIN_SECRET_LENGTH` characters -> length -> the values starting so.

        By length, not a list: keys handed out in sequence share their first characters
        (``rk-0001...``, and so do their base64 forms), and a lookup then costs one set
        probe per length rather than one comparison per key."""
        self._alphabet: frozenset[str] = frozenset()
        self._runs: re.Pattern[str] | None = None
        self._forms: dict[str, list[str]] = {}
        """Value -> the encoded forms indexed for it (removed with it)."""
        for value, name in list(self._names.items()):
            self._index_forms(name, value)

    def add(self, name: str, value: str | None) -> None:
        """As :meth:`Redactor.add`, its encoded forms included."""
        super().add(name, value)
        if value is not None and self._names.get(value) == name:
            with self._held_lock:
                self._index_forms(name, value)

    def hold(self, name: str, value: str | None) -> None:
        """Redact ``value`` as ``[REDACTED:name]`` until :meth:`release` (ignored when short)."""
        if not value or len(value) < MIN_SECRET_LENGTH:
            return
        with self._held_lock:
            count = self._counts.get(value, 0)
            self._counts[value] = count + 1
            if count:
                return
            if value in self._retired:
                del self._retired[value]  # still indexed
                return
            self._index_one(name, value)
            self._index_forms(name, value)

    def release(self, value: str | None) -> None:
        """End one :meth:`hold` of ``value``; the last one retires it."""
        if not value or value not in self._counts:
            return
        with self._held_lock:
            count = self._counts.pop(value, 0) - 1
            if count > 0:
                self._counts[value] = count
                return
            self._retired[value] = None
            while len(self._retired) > self.retained:
                oldest = next(iter(self._retired))
                del self._retired[oldest]
                self._unindex(oldest)

    @property
    def held(self) -> int:
        """How many distinct values are held now (released ones not counted)."""
        return len(self._counts)

    def _index_forms(self, name: str, value: str) -> None:
        forms = self._forms[value] = [f for f in encoded_forms(value) if f not in self._live_names]
        for form in forms:
            self._index_one(name, form)

    def _index_one(self, name: str, value: str) -> None:
        self._live_names[value] = name
        prefix = value[:MIN_SECRET_LENGTH]
        self._by_prefix.setdefault(prefix, {}).setdefault(len(value), set()).add(value)
        if not self._alphabet.issuperset(value):
            self._alphabet = self._alphabet.union(value)
            chars = "".join(sorted(self._alphabet))
            self._runs = re.compile(f"[{re.escape(chars)}]{{{MIN_SECRET_LENGTH},}}")

    def _unindex(self, value: str) -> None:
        for indexed in (value, *self._forms.pop(value, ())):
            if indexed in self._names:
                continue  # also a secret for good (its own encoded form, say)
            self._live_names.pop(indexed, None)
            prefix = indexed[:MIN_SECRET_LENGTH]
            bucket = self._by_prefix.get(prefix, {})
            values = bucket.get(len(indexed), set())
            values.discard(indexed)
            if not values:
                bucket.pop(len(indexed), None)
            if not bucket:
                self._by_prefix.pop(prefix, None)

    def redact(self, text: str) -> str:
        """``text`` redacted as by :class:`Redactor`, then of every held value."""
        text = super().redact(text)
        runs = self._runs
        if runs is None or len(text) < MIN_SECRET_LENGTH or not self._live_names:
            return text
        pieces: list[str] = []
        start = 0
        for match in runs.finditer(text):
            for begin, end, name in self._found_in(match.group(0)):
                offset = match.start()
                pieces.append(text[start : offset + begin])
                pieces.append(f"[REDACTED:{name}]")
                start = offset + end
        if not pieces:
            return text
        pieces.append(text[start:])
        return "".join(pieces)

    def _found_in(self, run: str) -> list[tuple[int, int, str]]:
        """``(start, end, name)`` of the held values in ``run``, left to right."""
        names = self._live_names
        name = names.get(run)
        if name is not None:
            return [(0, len(run), name)]  # the usual case: the run is the key
        found: list[tuple[int, int, str]] = []
        by_prefix = self._by_prefix
        i, last = 0, len(run) - MIN_SECRET_LENGTH
        while i <= last:
            bucket = by_prefix.get(run[i : i + MIN_SECRET_LENGTH])
            if bucket:
                for length in sorted(bucket, reverse=True):  # the longest value first
                    candidate = run[i : i + length]
                    if candidate in bucket[length]:
                        found.append((i, i + length, names.get(candidate, "SECRET")))
                        i += length
                        break
                else:
                    i += 1
            else:
                i += 1
        return found

    def redact_value(self, value: Any) -> Any:
        """As :meth:`Redactor.redact_value`, held values included (always a walk)."""
        return self._walk(value)


MAX_HELD_LINE = 65536
"""A line held longer than this (characters) is written in part, its last
:data:`HELD_TAIL` characters still held."""
HELD_TAIL = 1024


def _writer() -> object:
    """Who is writing: the asyncio task running, else the thread."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop running in this thread
        task = None
    return task if task is not None else threading.get_ident()


class RedactingStream:
    """A text stream in front of ``inner`` that writes whole lines, redacted.

    A line is held until its newline (or carriage return), so a secret written in pieces
    (one ``write`` per ``print`` argument, ``print(part, end="", flush=True)``) is still
    seen whole. Lines are held per writer (each asyncio task, each other thread), so that
    concurrent rollouts printing at once cannot cut each other's secrets in two; a task's
    unfinished line is written when the task ends, a thread's when it next writes a line
    (or at :meth:`close`). :meth:`flush` flushes ``inner`` and holds unfinished lines on.
    Everything else is ``inner``'s.
    """

    def __init__(self, inner: Any, redactor: Redactor) -> None:
        self.inner = inner
        self.redactor: Redactor | None = redactor
        """``None`` once switched off (another stream was put in front of this one)."""
        self._held: dict[object, str] = {}
        self._lock = threading.RLock()

    def write(self, text: str) -> int:
        """Write the complete lines of what this writer held plus ``text``; hold the rest."""
        redactor = self.redactor
        if redactor is None:
            return int(self.inner.write(text))
        writer = _writer()
        with self._lock:
            held = self._held.pop(writer, "") + text
            cut = max(held.rfind("\n"), held.rfind("\r")) + 1
            rest = held[cut:]
            if len(rest) > MAX_HELD_LINE:
                cut += len(rest) - HELD_TAIL
                rest = held[cut:]
            if rest:
                if writer not in self._held and isinstance(writer, asyncio.Task):
                    writer.add_done_callback(self._write_held)
                self._held[writer] = rest
            if cut:
                self.inner.write(redactor.redact(held[:cut]))
        return len(text)

    def _write_held(self, writer: object) -> None:
        with self._lock:
            held = self._held.pop(writer, "")
            if held:
                redactor = self.redactor
                self.inner.write(redactor.redact(held) if redactor is not None else held)

    def writelines(self, lines: Iterable[str]) -> None:
        """Write each of ``lines``."""
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        """Flush ``inner`` (unfinished lines stay held: a secret may be half written)."""
        self.inner.flush()

    def close(self) -> None:
        """Write every unfinished line (redacted), then flush ``inner``; ``inner`` stays open."""
        for writer in list(self._held):
            self._write_held(writer)
        self.inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def redact_std_streams(redactor: Redactor) -> Callable[[], None]:
    """Put :class:`RedactingStream` in front of ``sys.stdout`` and ``sys.stderr``.

    What a process prints (user code's ``print``, ``traceback.print_exc``, warnings) then
    reaches its output redacted. Writes made to the file descriptors directly (C code,
    subprocesses sharing them) are not seen. Returns the undo: it flushes, and puts the
    original streams back where the wrappers are still in place (a wrapper something else
    has since wrapped is switched off instead). The undo writes the lines still held.
    """
    installed: list[tuple[str, RedactingStream]] = []
    for name in ("stdout", "stderr"):
        current = getattr(sys, name)
        if current is None:
            continue
        stream = RedactingStream(current, redactor)
        setattr(sys, name, stream)
        installed.append((name, stream))

    def undo() -> None:
        for name, stream in installed:
            try:
                stream.close()
            except (OSError, ValueError):
                pass  # the underlying stream is already closed
            if getattr(sys, name) is stream:
                setattr(sys, name, stream.inner)
            else:
                stream.redactor = None

    return undo


def redact_all_handlers(redactor: Redactor) -> None:
    """Make every handler of every logger in this process redact with ``redactor``."""
    for logger in [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]:
        if isinstance(logger, logging.Logger):  # not a PlaceHolder
            for handler in list(logger.handlers):
                redact_handler(handler, redactor)
