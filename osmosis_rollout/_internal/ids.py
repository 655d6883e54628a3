"""Validation of untrusted ids (``rollout_id``) that end up joined onto filesystem paths."""

from __future__ import annotations

import os
from pathlib import PureWindowsPath


def is_single_path_segment(value: str) -> bool:
    """True when ``value`` is one plain path component: no separators, NUL, ``.`` or ``..``."""
    if not value or value in {".", ".."}:
        return False
    if any(ch in value for ch in ("/", "\\", "\x00")):
        return False
    # The official SDK checks ``Path(value).name`` of the host it runs on: ``"run:1"`` is
    # one segment on POSIX (a drive on Windows), and refusing it would break the wire.
    if os.name != "nt":
        # On POSIX only "/" separates and only "." and ".." are special, all refused above:
        # PurePosixPath(value).name is value itself (and building it costs more than the rest).
        return True
    return PureWindowsPath(value).name == value


def ensure_single_path_segment(value: str, *, label: str = "id") -> str:
    """Return ``value`` unchanged or raise ``ValueError`` naming ``label``."""
    if not is_single_path_segment(value):
        raise ValueError(
            f"{label} must be a single path segment (no '/', '\\\\' or NUL, and not '.' or '..'); "
            f"got {value!r}"
        )
    return value


MAX_ROLLOUT_ID_CHARS = 256
"""Longest ``rollout_id`` the server admits, in characters."""

MAX_ROLLOUT_ID_BYTES = 255
"""Longest ``rollout_id`` in UTF-8 bytes: it names the rollout's artifact directory, and a
file name longer than this (``NAME_MAX``) cannot be created, so its trajectory would be lost."""

ROLLOUT_ID_RULE = (
    f"rollout_id must be printable (no control characters or line breaks), have no "
    f"whitespace at either end, be at most {MAX_ROLLOUT_ID_CHARS} characters and "
    f"{MAX_ROLLOUT_ID_BYTES} bytes of UTF-8 (it names a directory), and be a single path "
    "segment (no '/', '\\\\' or NUL, and not '.' or '..')"
)
"""The rule :func:`ensure_rollout_id` enforces, quoted in its error."""


def is_valid_rollout_id(value: str) -> bool:
    """True when ``value`` is a rollout id the server admits (see :data:`ROLLOUT_ID_RULE`).

    Stricter than the official server, which admits ``" "``, ids with line breaks and ids
    too long for a file name: each of those breaks a directory name or a log line, and the
    last loses the rollout's trajectory.
    """
    return (
        0 < len(value) <= MAX_ROLLOUT_ID_CHARS
        and len(value.encode("utf-8", "surrogatepass")) <= MAX_ROLLOUT_ID_BYTES
        and value.isprintable()
        and value == value.strip()
        and is_single_path_segment(value)
    )


def ensure_rollout_id(value: str) -> str:
    """Return ``value`` unchanged or raise ``ValueError`` quoting the rule and the bad id."""
    if not is_valid_rollout_id(value):
        shown = value if len(value) <= 40 else value[:40] + f"... ({len(value)} characters)"
        raise ValueError(f"{ROLLOUT_ID_RULE}; got {shown!r}")
    return value
