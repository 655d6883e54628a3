"""A run's journal: ``rows.jsonl`` appended row by row, and ``run.json`` saying what was asked.

The journal is what survives a crash. Each finished row is appended as soon as its rollouts
end (one ``os.write`` of whole lines on an ``O_APPEND`` descriptor, so the bytes are in the
kernel before the call returns: a ``kill -9``, an OOM kill or a workflow's ``os._exit()``
right after loses nothing already written, and concurrent writers, threads or pytest-xdist
workers, never interleave inside a line).

Layout of a run directory::

    run.json      {"schema", "config", "selected": [row ids in order], "finished": {...} | null}
    rows.jsonl    one line per attempt of a finished row (the official ``index.jsonl`` keys,
                  plus ``nodeid``, ``dataset``, ``row_verdict``, ``row_stats``,
                  ``fingerprint`` and ``run_id``)

A row may be written again later (its verdict changed when pytest reported it, or an item
deadline added attempts); readers keep the last line of each ``(nodeid, run_index)``. A row
written by a later run (a resume that ran it again: another ``run_id``) replaces every line
of that row before it. A torn last line (the process died inside ``write``) is skipped, not
fatal; :func:`cut_torn_tail` removes it before a resumed run appends.

A write that fails (a full disk) is cut back to the whole lines before it and raised: the
journal never ends inside a line this process wrote.

``run.json`` is written when the rows are about to run (with ``finished: null``) and once
more at the end, saying whether every row ran and what stopped the run. A journal whose
``run.json`` has no ``finished`` record belongs to a run that died.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from osmosis_rollout._internal.atomic import write_json_atomic
from osmosis_rollout.redaction import Redactor
from osmosis_rollout.runs.report_model import JournalLine

__all__ = [
    "JOURNAL_FILENAME",
    "RUN_FILENAME",
    "RUN_SCHEMA",
    "JournalRow",
    "RowJournal",
    "RunJournalError",
    "cut_torn_tail",
    "index_journal",
    "parse_journal_row",
    "read_journal",
    "read_journal_lines",
    "read_journal_row",
    "read_run_file",
    "write_json_atomic",
    "write_run_file",
]

JOURNAL_FILENAME = "rows.jsonl"
RUN_FILENAME = "run.json"
RUN_SCHEMA = "pytest-osmosis/run/v1"

ROW_FIELDS = ("row_verdict", "row_stats", "fingerprint", "run_id")
"""Row-level keys each attempt line carries, beside the attempt's own keys."""


class RunJournalError(Exception):
    """A run directory that has no readable journal (names the file and what is wrong)."""


@dataclass
class JournalRow:
    """One row as the journal last recorded it."""

    nodeid: str
    dataset: str
    row_key: str
    verdict: str
    attempts: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] | None = None
    """What the row's result depends on (see :mod:`pytest_osmosis.results.resume`); None in a
    journal written before fingerprints."""
    run_id: str | None = None
    """The run that wrote the row."""


class RowJournal:
    """Appends finished rows to ``rows.jsonl``; safe to call from several threads.

    ``fresh=True`` truncates an existing journal first (a new run in a reused output
    directory); ``fresh=False`` appends (a resumed run, or a pytest-xdist worker). The
    file and its directory are created on the first write, not before. Every value is
    passed through ``redactor`` before it reaches the disk. ``run_id`` is written on every
    line (see :func:`index_journal`).
    """

    def __init__(
        self,
        path: Path,
        *,
        fresh: bool,
        redactor: Redactor | None = None,
        run_id: str | None = None,
    ) -> None:
        self.path = path
        self.run_id = run_id
        # Not `redactor or ...`: one with no secret yet is falsy, and is still the one
        # the policy endpoint's key joins when the engine starts.
        self.redactor = redactor if redactor is not None else Redactor()
        self._fresh = fresh
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._closed = False

    def _open(self) -> int:
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0)
            flags |= os.O_TRUNC if self._fresh else 0
            self._fd = os.open(self.path, flags, 0o644)
        return self._fd

    def write_row(
        self,
        attempts: Sequence[Mapping[str, Any]],
        *,
        verdict: str,
        stats: Mapping[str, Any],
        fingerprint: Mapping[str, Any] | None = None,
    ) -> None:
        """Append one row: each attempt line carries the row's verdict and statistics."""
        self.write_encoded(
            self.encode_row(attempts, verdict=verdict, stats=stats, fingerprint=fingerprint)
        )

    def encode_row(
        self,
        attempts: Sequence[Mapping[str, Any]],
        *,
        verdict: str,
        stats: Mapping[str, Any],
        fingerprint: Mapping[str, Any] | None = None,
    ) -> bytes:
        """The redacted lines :meth:`write_row` appends for one row (to compare or write later)."""
        lines = []
        row_fields: dict[str, Any] = {}
        if fingerprint is not None:
            row_fields["fingerprint"] = dict(fingerprint)
        if self.run_id is not None:
            row_fields["run_id"] = self.run_id
        for attempt in attempts:
            line = {**attempt, "row_verdict": verdict, "row_stats": dict(stats), **row_fields}
            lines.append(_encode_redacted(line, self.redactor) + "\n")
        return "".join(lines).encode("utf-8", errors="backslashreplace")

    def write_encoded(self, data: bytes) -> bool:
        """Append lines made by :meth:`encode_row`; False when the journal is already closed.

        An ``OSError`` (a full disk) is raised after cutting the file back to where this
        write began, so no torn line is left behind; the journal is closed then.
        """
        with self._lock:
            if self._closed:
                return False
            fd = self._open()
            start = os.lseek(fd, 0, os.SEEK_END)
            view = memoryview(data)
            try:
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            except OSError:
                # Shrinking a file needs no free space: the journal keeps whole lines only.
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
                self._closed = True
                os.close(fd)
                self._fd = None
                raise
        return True

    def close(self) -> None:
        """Close the file; later writes are dropped (the run is over)."""
        with self._lock:
            self._closed = True
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _encode_redacted(line: dict[str, Any], redactor: Redactor) -> str:
    """``line`` redacted, as one line of JSON (keys sorted, other objects as their ``str``)."""
    try:
        text = json.dumps(line, sort_keys=True)
    except (TypeError, ValueError):
        text = None  # objects JSON cannot encode (written as their str) or a cycle
    if text is not None and redactor.absent_from_json(text):
        return text  # what redacting the values first gives, without walking them
    return json.dumps(redactor.redact_value(line), sort_keys=True, default=str)


def cut_torn_tail(path: Path) -> int:
    """Cut ``path`` back to its last newline; the number of bytes removed (0 when it ends
    with a whole line, or does not exist).

    A run killed inside ``write``, or one whose disk filled up, may leave a last line with
    no newline: appending to it would glue the next row onto it, and lose that row too.
    """
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return 0
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        end = size
        chunk = 64 * 1024
        while end > 0:
            start = max(0, end - chunk)
            os.lseek(fd, start, os.SEEK_SET)
            data = os.read(fd, end - start)
            newline = data.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            end = start
        else:
            keep = 0
        if keep < size:
            os.ftruncate(fd, keep)
        return size - keep
    finally:
        os.close(fd)


def read_journal(path: Path) -> tuple[list[JournalRow], int]:
    """The rows of a journal in first-appearance order, and how many lines were unreadable.

    The last line of each ``(nodeid, run_index)`` wins; a row's verdict and statistics are
    those of its last line. A missing file is an empty journal (no row finished).

    Each line is read through :class:`~osmosis_rollout.runs.report_model.JournalLine`, the model
    the report's rows share: a line that breaks it is a :class:`RunJournalError` naming the
    line and the field.
    """
    where, bad = index_journal(path)
    if not where:
        return [], bad
    rows = []
    with path.open("rb") as handle:
        for offsets in where.values():
            lines = read_journal_lines(handle, offsets)
            for offset, raw in zip(offsets, lines, strict=True):
                _check_line(path, offset, raw)
            rows.append(parse_journal_row(lines, last=offsets.index(max(offsets))))
    return rows, bad


def _check_line(path: Path, offset: int, raw: bytes) -> None:
    try:
        JournalLine.model_validate(_loads(raw))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:3]
        )
        raise RunJournalError(
            f"{path}: the line at byte {offset} is not a journal line ({problems}); "
            "restore the file, or start a new run without --osmosis-resume"
        ) from None


def index_journal(path: Path) -> tuple[dict[str, list[int]], int]:
    """Where each row's attempt lines are, and how many lines were unreadable.

    Node id (in first-appearance order) -> the byte offsets of the row's attempt lines: the
    last line of each ``(nodeid, run_index)``, ordered by ``run_index``; a line of another
    ``run_id`` than the row's lines before it starts the row afresh. A missing file is an
    empty journal.
    """
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return {}, 0
    by_attempt: dict[str, dict[Any, int]] = {}
    written_by: dict[str, Any] = {}
    bad = 0
    offset = 0
    with handle:
        for raw in handle:
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            try:
                line = _loads(raw)
            except ValueError:
                bad += 1
                continue
            if not isinstance(line, dict) or not isinstance(line.get("nodeid"), str):
                bad += 1
                continue
            nodeid = _shared(line["nodeid"])
            run_id = line.get("run_id")
            if nodeid in written_by and written_by[nodeid] != run_id:
                del by_attempt[nodeid]  # run again by a later run: its lines replace these
            written_by[nodeid] = run_id
            by_attempt.setdefault(nodeid, {})[line.get("run_index", 0)] = start
    return {
        nodeid: [attempts[k] for k in sorted(attempts, key=_run_index_order)]
        for nodeid, attempts in by_attempt.items()
    }, bad


def read_journal_row(
    handle: IO[bytes],
    offsets: Sequence[int],
    *,
    keep: frozenset[str] | None = None,
    share: bool = True,
) -> JournalRow:
    """The row whose attempt lines start at ``offsets`` (from :func:`index_journal`) of a
    journal opened with ``open(path, "rb")``; only the attempts' keys in ``keep`` (all when
    None). Its verdict and statistics are those of its last line written.

    ``share``: keys and oft-repeated values are interned, for a caller that holds many rows;
    one that reads a row at a time and lets it go passes False (it is faster).
    """
    lines = read_journal_lines(handle, offsets)
    return parse_journal_row(lines, last=offsets.index(max(offsets)), keep=keep, share=share)


def read_journal_lines(handle: IO[bytes], offsets: Sequence[int]) -> list[bytes]:
    """The lines that start at ``offsets`` of a journal opened with ``open(path, "rb")``."""
    lines = []
    for offset in offsets:
        handle.seek(offset)
        lines.append(handle.readline())
    return lines


def parse_journal_row(
    lines: Sequence[bytes],
    *,
    last: int,
    keep: frozenset[str] | None = None,
    share: bool = True,
) -> JournalRow:
    """The row whose attempt lines are ``lines`` (``lines[last]`` written last), as
    :func:`read_journal_row` reads it."""
    attempts = []
    last_line: dict[str, Any] = {}
    last_fields: tuple[Any, ...] = (None, None, None, None)
    for index, raw in enumerate(lines):
        line = _loads(raw)
        fields = tuple(line.pop(name, None) for name in ROW_FIELDS)
        if index == last:
            last_line, last_fields = line, fields
        if keep is not None:
            line = {k: v for k, v in line.items() if k in keep}
        if share:
            line = {_shared(k): _shared_value(k, v) for k, v in line.items()}
        attempts.append(line)
    verdict, stats, fingerprint, run_id = last_fields
    return JournalRow(
        nodeid=_shared(str(last_line["nodeid"])),
        dataset=_shared(str(last_line.get("dataset", ""))),
        row_key=str(last_line.get("row_key", "")),
        verdict=_shared(str(verdict or _verdict_of(last_line))),
        attempts=attempts,
        stats={_shared(str(k)): v for k, v in dict(stats or {}).items()},
        fingerprint=fingerprint if isinstance(fingerprint, dict) else None,
        run_id=run_id if isinstance(run_id, str) else None,
    )


_SHARED_VALUES = frozenset({"dataset", "status", "error_type", "error_phase"})
"""Attempt keys whose values repeat from row to row (a handful of distinct strings)."""


def _loads(raw: bytes) -> Any:
    """``json.loads(raw)``: a line that opens an object with no NUL after the brace is the
    UTF-8 that json would detect (in Python, per call), so it is decoded as json does."""
    if raw[:1] == b"{" and raw[1:2] != b"\x00":
        return json.loads(raw.decode("utf-8", "surrogatepass"))
    return json.loads(raw)


def _shared(text: str) -> str:
    return sys.intern(text)


def _shared_value(key: str, value: Any) -> Any:
    if key in _SHARED_VALUES and isinstance(value, str) and len(value) <= 512:
        return sys.intern(value)
    return value


def _run_index_order(value: Any) -> tuple[int, str]:
    return (value, "") if isinstance(value, int) else (1 << 30, str(value))


def _verdict_of(attempt: Mapping[str, Any]) -> str:
    if attempt.get("status") == "skipped":
        return "skipped"
    return "passed" if attempt.get("passed") else "failed"


def write_run_file(
    run_dir: Path,
    *,
    config: Mapping[str, Any],
    selected: Iterable[str],
    finished: Mapping[str, Any] | None = None,
    resumed_from: Sequence[str] = (),
    run_id: str | None = None,
    resume: Mapping[str, Any] | None = None,
) -> None:
    """Write ``run.json``: the run's identity, configuration, selected rows and how it ended.

    ``run_id`` and the schema are how a later run recognises the folder as a run's;
    ``resume`` says what a resumed run kept and ran again.
    """
    write_json_atomic(
        run_dir / RUN_FILENAME,
        {
            "schema": RUN_SCHEMA,
            "run_id": run_id,
            "config": dict(config),
            "selected": list(dict.fromkeys(selected)),
            "finished": dict(finished) if finished is not None else None,
            "resumed": list(resumed_from),
            "resume": dict(resume) if resume is not None else None,
        },
    )


def read_run_file(run_dir: Path) -> dict[str, Any]:
    """``run.json`` of ``run_dir``; :class:`RunJournalError` naming the problem otherwise."""
    path = run_dir / RUN_FILENAME
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunJournalError(
            f"{path}: not found; {run_dir} is not a pytest-osmosis run directory "
            "(expected run.json and rows.jsonl, as written under .osmosis/runs/<run>/)"
        ) from None
    except (OSError, ValueError) as exc:
        raise RunJournalError(f"{path}: unreadable: {exc}") from None
    if not isinstance(document, dict) or document.get("schema") != RUN_SCHEMA:
        raise RunJournalError(f"{path}: not a pytest-osmosis run file (schema {RUN_SCHEMA!r})")
    return document
