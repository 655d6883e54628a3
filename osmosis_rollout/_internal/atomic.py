"""Atomic file writes: a reader sees the old file or the whole new one, never half of it.

Every writer of a finished document (report, HTML, run file, trajectory, cassette) goes
through :func:`atomic_file`: the content goes to a uniquely named temporary file beside the
target, which then replaces the target with ``os.replace``; on any failure the temporary
file is removed. Names are unique per process and call (process id and a serial; random
when a stale file holds that name), so concurrent writers of one target never share a
temporary file, and the file keeps the permissions a plain ``open`` gives.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

_serials = itertools.count()
_Opened = TypeVar("_Opened")


def _temporary(path: Path, *, unique: bool = False) -> Path:
    # The process id and a per-process serial are unique among live writers; ``unique``
    # adds randomness, for when a crashed process of a reused pid left that name behind.
    suffix = f"{os.getpid()}.{next(_serials)}"
    if unique:
        suffix += "." + secrets.token_hex(4)
    return path.with_name(f".{path.name}.{suffix}.tmp")


def _claim_temporary(path: Path, create: Callable[[Path], _Opened]) -> tuple[Path, _Opened]:
    """A new temporary file beside ``path``, made by ``create`` (which must refuse an existing
    file); the parent directory is made when it is missing (checked only then, as the usual
    parent exists)."""
    try:
        return _claim_temporary_in(path, create)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return _claim_temporary_in(path, create)


def _claim_temporary_in(path: Path, create: Callable[[Path], _Opened]) -> tuple[Path, _Opened]:
    tmp = _temporary(path)
    try:
        return tmp, create(tmp)
    except FileExistsError:
        tmp = _temporary(path, unique=True)
        return tmp, create(tmp)


@contextmanager
def atomic_file(path: Path, *, errors: str = "strict") -> Iterator[IO[str]]:
    """Open a text file that becomes ``path`` (UTF-8) when the ``with`` block ends cleanly.

    The parent directory is created. ``errors`` is the encoder's error handler.
    """
    tmp, handle = _claim_temporary(path, lambda t: t.open("x", encoding="utf-8", errors=errors))
    try:
        with handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# O_BINARY: on Windows a descriptor opened without it translates "\n" on write, and the
# text is already translated to os.linesep.
_CREATE_NEW = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
)


def write_text_atomic(path: Path, text: str, *, errors: str = "strict") -> None:
    """Write ``text`` to ``path`` atomically (UTF-8; ``errors`` as in :func:`atomic_file`).

    The same bytes as :func:`atomic_file` writes, through the file descriptor: a text file
    object costs a ``fstat``, an ``isatty`` and ``lseek`` calls on top, and the plugin writes
    one small file per rollout this way.
    """
    if os.linesep != "\n":
        text = text.replace("\n", os.linesep)  # as a text-mode file translates it
    data = text.encode("utf-8", errors)
    tmp, fd = _claim_temporary(path, lambda t: os.open(t, _CREATE_NEW, 0o666))
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, document: Any) -> None:
    """Write ``document`` as indented JSON to ``path`` atomically; objects JSON cannot
    encode are written as their ``str``."""
    with atomic_file(path) as handle:
        json.dump(document, handle, indent=2, default=str)
        handle.write("\n")


def copy_atomic(source: Path, path: Path) -> None:
    """Copy ``source`` to ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(path)
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


__all__ = ["atomic_file", "copy_atomic", "write_json_atomic", "write_text_atomic"]
