"""Validation of untrusted ids (``rollout_id``) that end up joined onto filesystem paths."""

from __future__ import annotations

from pathlib import PurePosixPath, PureWindowsPath


def is_single_path_segment(value: str) -> bool:
    """True when ``value`` is one plain path component: no separators, NUL, ``.`` or ``..``."""
    if not value or value in {".", ".."}:
        return False
    if any(ch in value for ch in ("/", "\\", "\x00")):
        return False
    return PurePosixPath(value).name == value and PureWindowsPath(value).name == value


def ensure_single_path_segment(value: str, *, label: str = "id") -> str:
    """Return ``value`` unchanged or raise ``ValueError`` naming ``label``."""
    if not is_single_path_segment(value):
        raise ValueError(
            f"{label} must be a single path segment (no '/', '\\\\' or NUL, and not '.' or '..'); "
            f"got {value!r}"
        )
    return value
