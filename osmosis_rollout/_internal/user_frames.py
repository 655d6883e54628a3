"""Where user code failed: the user's frame (``main.py:42 in run``) and a short traceback.

A rollout's exception passes through our backend, asyncio, a framework or a thread pool
before anyone reads it; its full traceback (``rollouts.log`` has it) is mostly theirs. A person
fixing the rollout wants the lines of *their* code: the frames outside the standard library,
installed packages and this distribution, the innermost of them named on one line.
"""

from __future__ import annotations

import functools
import linecache
import os
import sysconfig
import traceback
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MAX_USER_FRAMES",
    "UserTraceback",
    "is_user_file",
    "user_error_fields",
    "user_traceback",
]

MAX_USER_FRAMES = 6
"""User frames a short traceback keeps (the innermost ones; it says how many it left out)."""

_MAX_LINE_CHARS = 200
_MAX_MESSAGE_CHARS = 500

_OURS = Path(__file__).resolve().parents[2]
"""The folder holding ``osmosis_rollout`` (and ``pytest_osmosis`` beside it)."""


def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    roots.update(str(_OURS / package) for package in ("osmosis_rollout", "pytest_osmosis"))
    return tuple(os.path.realpath(root) + os.sep for root in roots)


_LIBRARY_ROOTS = _library_roots()


@functools.lru_cache(maxsize=1024)
def is_user_file(filename: str) -> bool:
    """Whether ``filename`` is user code: not the standard library, an installed package or ours."""
    if not filename or filename.startswith("<"):
        return False  # <frozen importlib._bootstrap>, <string>
    if "site-packages" in filename or "dist-packages" in filename:
        return False
    real = os.path.realpath(filename)
    return not real.startswith(_LIBRARY_ROOTS)


@dataclass(frozen=True)
class UserTraceback:
    """An exception seen from the user's code."""

    where: str | None
    """The innermost user frame, ``rollouts/demo/main.py:42 in run``; None when no user
    frame is on the traceback (the error came from a library or from us)."""
    text: str
    """The user frames, innermost last (at most :data:`MAX_USER_FRAMES`), then the exception
    line: Python's own layout, every line clipped."""


def _display(filename: str) -> str:
    """``filename`` relative to the working directory when under it (as a person typed it)."""
    try:
        shown = os.path.relpath(filename)
    except ValueError:  # another drive on Windows
        return filename
    return filename if shown.startswith("..") else shown


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The user frames of ``exc``, else of the exception it was raised from or during."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = [
            f for f in traceback.extract_tb(current.__traceback__) if is_user_file(f.filename)
        ]
        if frames:
            return frames
        current = current.__cause__ or current.__context__
    return []


def user_traceback(exc: BaseException) -> UserTraceback:
    """``exc``'s user frame and short traceback (see :class:`UserTraceback`)."""
    frames = _user_frames(exc)
    message = str(exc)
    head = type(exc).__name__
    last = _clip(f"{head}: {message}" if message else head, _MAX_MESSAGE_CHARS)
    if not frames:
        return UserTraceback(where=None, text=last)
    kept = frames[-MAX_USER_FRAMES:]
    lines = ["Traceback (user code, most recent call last):"]
    if len(frames) > len(kept):
        lines.append(f"  ... {len(frames) - len(kept)} earlier user frames left out")
    for frame in kept:
        where = f'  File "{_display(frame.filename)}", line {frame.lineno}, in {frame.name}'
        lines.append(_clip(where, _MAX_LINE_CHARS))
        source = frame.line or linecache.getline(frame.filename, frame.lineno or 0).strip()
        if source:
            lines.append(_clip(f"    {source}", _MAX_LINE_CHARS))
    lines.append(last)
    inner = kept[-1]
    where = f"{_display(inner.filename)}:{inner.lineno} in {inner.name}"
    return UserTraceback(where=where, text="\n".join(lines))


def user_error_fields(exc: BaseException) -> dict[str, str]:
    """``{"where": ..., "traceback": ...}`` of ``exc`` for a result's ``extra_fields``
    (``where`` only when a user frame is on the traceback)."""
    seen = user_traceback(exc)
    fields = {"traceback": seen.text}
    if seen.where is not None:
        fields["where"] = seen.where
    return fields
