"""A run's journal: ``rows.jsonl`` appended row by row, and ``run.json`` saying what was asked.

The journal is what survives a crash. Each row is appended once, as soon as its verdict is
decided (one ``os.write`` of a whole line on an ``O_APPEND`` descriptor, so the bytes are in
the kernel before the call returns: a ``kill -9``, an OOM kill or a workflow's ``os._exit()``
right after loses nothing already written, and concurrent writers, threads or pytest-xdist
workers, never interleave inside a line).

Layout of a run directory::

    run.json      {"schema", "config", "selected": [row ids in order], "finished": {...} | null}
    rows.jsonl    one line per row: a :class:`~osmosis_rollout.runs.report_model.RowRecord`
                  (its verdict, statistics, fingerprint, the run that wrote it, and its
                  attempts with the official ``index.jsonl`` keys)

Lines are written and read by that one model. A row written again by a later run (a resume
that ran it again) replaces the earlier line: readers keep the last line of each node id. A
torn last line (the process died inside ``write``) is skipped, not fatal;
:func:`cut_torn_tail` removes it before a resumed run appends. A journal written by an
earlier release (one line per attempt) is refused with the way out.

A write that fails (a full disk) is cut back to the whole lines before it and raised: the
journal never ends inside a line this process wrote.

``run.json`` is written when the rows are about to run (with ``finished: null``) and once
more at the end, saying whether every row ran and what stopped the run. A journal whose
``run.json`` has no ``finished`` record belongs to a run that died.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from osmosis_rollout._internal.atomic import write_json_atomic
from osmosis_rollout.redaction import Redactor
from osmosis_rollout.runs.report_model import RowRecord

__all__ = [
    "JOURNAL_FILENAME",
    "ROLLOUTS_LOG",
    "RUN_FILENAME",
    "RUN_SCHEMA",
    "TRAJECTORIES_DIR",
    "RowJournal",
    "RunJournalError",
    "cut_torn_tail",
    "read_journal",
    "read_json_object",
    "read_run_file",
    "write_json_atomic",
    "write_run_file",
]

JOURNAL_FILENAME = "rows.jsonl"
RUN_FILENAME = "run.json"
RUN_SCHEMA = "pytest-osmosis/run/v1"
ROLLOUTS_LOG = "rollouts.log"
"""What the rollouts logged and printed, in the run folder."""
TRAJECTORIES_DIR = "rollouts"
"""The run folder's subfolder of per-attempt trajectories and diagnostics."""


class RunJournalError(Exception):
    """A run directory that has no readable journal (names the file and what is wrong)."""


class RowJournal:
    """Appends rows to ``rows.jsonl``, one line each; safe to call from several threads.

    ``fresh=True`` truncates an existing journal first (a new run in a reused output
    directory); ``fresh=False`` appends (a resumed run, or a pytest-xdist worker). The
    file and its directory are created on the first write, not before. Every value is
    passed through ``redactor`` before it reaches the disk; ``run_id`` is written on every
    line.
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

    def write_row(self, record: RowRecord) -> bool:
        """Append ``record`` as one line (redacted, stamped with this run's id); False when
        the journal is already closed. An ``OSError`` is raised as :meth:`write_encoded`
        says."""
        record.run_id = self.run_id
        try:
            text: str | None = record.model_dump_json()
        except ValueError:  # a lone surrogate, or a value JSON has no form for
            text = None
        if text is None or not self.redactor.absent_from_json(text):
            redacted = self.redactor.redact_value(record.model_dump(mode="python"))
            text = json.dumps(redacted, ensure_ascii=False, default=str)
        # A lone surrogate has no UTF-8 form: "?" keeps the line readable.
        return self.write_encoded((text + "\n").encode("utf-8", errors="replace"))

    def write_encoded(self, data: bytes) -> bool:
        """Append whole lines of bytes; False when the journal is already closed.

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
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)
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


def read_journal(path: Path, redactor: Redactor | None = None) -> tuple[list[RowRecord], int]:
    """The rows of a journal in first-appearance order, and how many lines were unreadable
    (a torn last line). The last line of each node id wins. A missing file is an empty
    journal (no row finished). With ``redactor``, a line that holds one of its secrets (one
    written before the secret was known) is read redacted.

    Each line is read through :class:`~osmosis_rollout.runs.report_model.RowRecord`, the
    model that wrote it: a line that breaks it is a :class:`RunJournalError` naming the line
    and the field.
    """
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return [], 0
    rows: dict[str, RowRecord] = {}
    bad = 0
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                if redactor is not None and _holds_secret(raw, redactor):
                    record = RowRecord.model_validate(redactor.redact_value(json.loads(raw)))
                else:
                    record = RowRecord.model_validate_json(raw)
            except ValidationError as exc:
                if exc.errors()[0]["type"] != "json_invalid":
                    raise RunJournalError(_not_a_row(path, number, raw, exc)) from None
                bad += 1  # a torn line
                continue
            except ValueError:  # a torn line, read through json.loads
                bad += 1
                continue
            rows.pop(record.nodeid, None)  # a later line (a resume's) replaces the row
            rows[record.nodeid] = record
    return list(rows.values()), bad


def _holds_secret(raw: bytes, redactor: Redactor) -> bool:
    try:
        return not redactor.absent_from_json(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return True


def _not_a_row(path: Path, number: int, raw: bytes, exc: ValidationError) -> str:
    if b'"row_verdict"' in raw and b'"attempts"' not in raw:
        return (
            f"{path}: written by an earlier pytest-osmosis (one line per attempt); this "
            "release writes one line per row. Rebuild that run's report with the release "
            "that wrote it, or start a fresh run (without --osmosis-resume)"
        )
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:3]
    )
    return (
        f"{path}: line {number} is not a journal row ({problems}); restore the file, or "
        "start a new run without --osmosis-resume"
    )


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


def read_json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path`` (a run file, a lock, a trajectory); None when it cannot
    be read as one."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None
