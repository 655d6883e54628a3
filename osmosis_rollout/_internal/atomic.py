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
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

_serials = itertools.count()
_INDENT = 2


def _temporary(path: Path, *, unique: bool = False) -> Path:
    # The process id and a per-process serial are unique among live writers; ``unique``
    # adds randomness, for when a crashed process of a reused pid left that name behind.
    suffix = f"{os.getpid()}.{next(_serials)}"
    if unique:
        suffix += "." + secrets.token_hex(4)
    return path.with_name(f".{path.name}.{suffix}.tmp")


def _open_temporary(path: Path, errors: str) -> tuple[Path, IO[str]]:
    tmp = _temporary(path)
    try:
        return tmp, tmp.open("x", encoding="utf-8", errors=errors)
    except FileExistsError:
        tmp = _temporary(path, unique=True)
        return tmp, tmp.open("x", encoding="utf-8", errors=errors)


@contextmanager
def atomic_file(path: Path, *, errors: str = "strict") -> Iterator[IO[str]]:
    """Open a text file that becomes ``path`` (UTF-8) when the ``with`` block ends cleanly.

    The parent directory is created. ``errors`` is the encoder's error handler.
    """
    try:
        tmp, handle = _open_temporary(path, errors)
    except FileNotFoundError:
        # The parent is missing: make it (checked only then, as the usual parent exists).
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp, handle = _open_temporary(path, errors)
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


def _create_temporary(path: Path) -> tuple[Path, int]:
    tmp = _temporary(path)
    try:
        return tmp, os.open(tmp, _CREATE_NEW, 0o666)
    except FileExistsError:
        tmp = _temporary(path, unique=True)
        return tmp, os.open(tmp, _CREATE_NEW, 0o666)


def write_text_atomic(path: Path, text: str, *, errors: str = "strict") -> None:
    """Write ``text`` to ``path`` atomically (UTF-8; ``errors`` as in :func:`atomic_file`).

    The same bytes as :func:`atomic_file` writes, through the file descriptor: a text file
    object costs a ``fstat``, an ``isatty`` and ``lseek`` calls on top, and the plugin writes
    one small file per rollout this way.
    """
    if os.linesep != "\n":
        text = text.replace("\n", os.linesep)  # as a text-mode file translates it
    data = text.encode("utf-8", errors)
    try:
        tmp, fd = _create_temporary(path)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp, fd = _create_temporary(path)
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
    """Write ``document`` as indented JSON to ``path`` atomically.

    Streamed to the file, so a 10,000-row report never exists as one string; objects JSON
    cannot encode are written as their ``str``.
    """
    with atomic_file(path) as handle:
        json.dump(document, handle, indent=2, default=str)
        handle.write("\n")


class JsonListSpool:
    """A list of a JSON document's top level, kept formatted in an anonymous temporary file.

    Items are formatted once, as :func:`write_json_atomic` writes them in such a list, as
    they are appended; :func:`write_json_streamed` copies the text into each document that
    holds the list. A list made once for several files never exists whole in memory.

    The file is made in ``directory`` (the system's temporary directory when None). A
    failure to make or write it (a full disk) is not raised by :meth:`append`, whose caller
    may be computing more than the list, but by :meth:`write_to`: a document that holds the
    list then fails to be written, as it would have without the spool.
    """

    def __init__(self, directory: Path | None = None) -> None:
        self._directory = directory
        self._file: IO[str] | None = None
        self._error: OSError | None = None
        self.count = 0
        """How many items were appended."""

    def append(self, item: Any) -> None:
        """Format ``item`` into the list."""
        pad = "\n" + " " * (2 * _INDENT)
        text = (pad if self.count == 0 else "," + pad) + _nested_json(item, 2)
        self.count += 1
        if self._error is not None:
            return
        try:
            if self._file is None:
                # Kept open until close(); newline="": the text is copied as it was written
                # (the document's file translates newlines).
                self._file = tempfile.TemporaryFile(  # noqa: SIM115
                    "w+", encoding="utf-8", newline="", dir=self._directory
                )
            self._file.write(text)
        except OSError as exc:
            self._error = exc

    def write_to(self, handle: IO[str]) -> None:
        """Write the list, as a value of the document's top level, to ``handle``."""
        if self._error is not None:
            raise self._error
        if self._file is None:
            handle.write("[]")
            return
        handle.write("[")
        self._file.seek(0)
        shutil.copyfileobj(self._file, handle)
        handle.write("\n" + " " * _INDENT + "]")

    def close(self) -> None:
        """Remove the temporary file (text still buffered for it is dropped: a full disk
        that refuses it does not matter to a file being thrown away)."""
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError:
                file.close()  # the buffer was cleared by the failed flush: this closes it


def write_json_streamed(
    path: Path,
    document: Mapping[str, Any],
    streamed: Mapping[str, Callable[[], Iterable[Any]] | JsonListSpool],
) -> None:
    """:func:`write_json_atomic` of ``document`` whose keys in ``streamed`` are lists made
    item by item: ``streamed[key]()`` yields them as they are written, or they were
    formatted into a :class:`JsonListSpool` (the key's value in ``document`` only holds its
    place). The bytes are those :func:`write_json_atomic` writes for the document with
    those lists in it, which never exist whole.
    """
    pad = " " * _INDENT
    with atomic_file(path) as handle:
        handle.write("{" if document else "{}")
        for index, (key, value) in enumerate(document.items()):
            handle.write(("\n" if index == 0 else ",\n") + pad + json.dumps(key) + ": ")
            source = streamed.get(key)
            if source is None:
                handle.write(_nested_json(value, 1))
                continue
            if isinstance(source, JsonListSpool):
                source.write_to(handle)
                continue
            empty = True
            for item in source():
                handle.write(("[\n" if empty else ",\n") + pad * 2 + _nested_json(item, 2))
                empty = False
            handle.write("[]" if empty else "\n" + pad + "]")
        handle.write("\n}\n" if document else "\n")


def _nested_json(value: Any, level: int) -> str:
    """``value`` as :func:`write_json_atomic` writes it ``level`` levels deep (JSON strings
    hold no raw newline, so every newline is the indentation's)."""
    text = json.dumps(value, indent=_INDENT, default=str)
    return text.replace("\n", "\n" + " " * (_INDENT * level))


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


__all__ = [
    "JsonListSpool",
    "atomic_file",
    "copy_atomic",
    "write_json_atomic",
    "write_json_streamed",
    "write_text_atomic",
]
