"""The run's output folder: one run's alone while it runs, and never holding foreign files.

A run claims its folder before it writes anything there (:meth:`RunFolder.claim`). The folder
is the run's when the run creates it, when it is empty, or when its ``run.json`` has our schema
and a run id (an earlier run's); any other folder is refused, naming what is there. An
exclusive ``flock`` on ``run.lock``, held until the run ends, makes a second run fail at start,
naming the holder. A fresh run removes an earlier run's journal and report only once its own
rows are about to run (:meth:`RunFolder.start`); a resumed run cuts a torn last journal line.

A run that never ran a row leaves the folder as it found it (:meth:`RunFolder.abandon`). A run
file that cannot be written (a full disk) stops the run (:meth:`RunFolder.write_failed`).
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from osmosis_rollout.errors import RunFolderError
from osmosis_rollout.runs.journal import (
    JOURNAL_FILENAME,
    RUN_FILENAME,
    RUN_SCHEMA,
    cut_torn_tail,
    read_json_object,
    write_run_file,
)

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, the folder is not locked
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_FILENAME", "REPORT_FILENAME", "RunFolder"]

LOCK_FILENAME = "run.lock"
REPORT_FILENAME = "report.json"
SHOWN_FILES = 5
"""Foreign file names listed before "... and N more"."""


class RunFolder:
    """The output folder of one run (``flag`` names it in messages: ``--osmosis-output``)."""

    def __init__(self, path: Path, *, run_id: str, flag: str = "--osmosis-output") -> None:
        self.path = path
        self.run_id = run_id
        self.flag = flag
        self.torn_bytes = 0
        """How many bytes of a torn last journal line :meth:`claim` cut (resume only)."""
        self._fd: int | None = None
        self._created: Path | None = None
        """The outermost folder the claim created (removed again by :meth:`abandon`)."""
        self._started = False
        self.write_failure: str | None = None
        """Why a run file could not be written: ``disk full writing rows.jsonl`` (the first)."""

    def write_failed(self, exc: OSError, name: str) -> None:
        """``name`` could not be written: remember why (the first failure stops the run)."""
        full = exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
        self.failed_elsewhere(f"{'disk full' if full else exc.strerror or exc} writing {name}")

    def file_failed(self, path: Path, exc: OSError) -> None:
        """A cassette or trajectory at ``path`` could not be written: as :meth:`write_failed`,
        naming it from this folder when it lies inside."""
        self.write_failed(
            exc, str(path.relative_to(self.path) if path.is_relative_to(self.path) else path)
        )

    def failed_elsewhere(self, reason: str) -> None:
        """A pytest-xdist worker could not write a file of this run: remember its ``reason``."""
        if self.write_failure is None:
            self.write_failure = reason

    @property
    def claimed(self) -> bool:
        """True while this run holds the folder's lock."""
        return self._fd is not None

    def claim(self, *, resume: bool, overwrite: bool = True) -> None:
        """Check the folder is ours, lock it, and (``resume``) cut a torn journal tail; else
        :class:`RunFolderError` naming the holder, the foreign files or (unless ``overwrite``)
        the earlier run a fresh run would replace, with nothing created or changed."""
        if self.path.is_dir():
            self._check_ours(resume=resume)
        else:
            self._created = _make_dirs(self.path)
        try:
            self._lock()
        except BaseException:
            self.abandon()
            raise
        earlier = [n for n in (REPORT_FILENAME, JOURNAL_FILENAME) if (self.path / n).exists()]
        if earlier and not resume and not overwrite:
            self.release()
            raise RunFolderError(
                f"{self.flag}: {self.path} holds an earlier run ({', '.join(earlier)}); pass "
                f"--osmosis-resume {self.path} to continue it, --osmosis-overwrite to replace "
                "it, or choose another folder"
            )
        if resume:
            self.torn_bytes = cut_torn_tail(self.path / JOURNAL_FILENAME)

    def _check_ours(self, *, resume: bool) -> None:
        names = sorted(p.name for p in self.path.iterdir() if p.name != LOCK_FILENAME)
        run = read_json_object(self.path / RUN_FILENAME) or {}
        ours = run.get("schema") == RUN_SCHEMA
        if not names or resume or (ours and isinstance(run.get("run_id"), str)):
            return
        shown = ", ".join(names[:SHOWN_FILES])
        more = len(names) - SHOWN_FILES
        older = (
            " (its run.json, written before runs had an id, is an earlier version's: remove "
            "the folder to reuse it)"
            if ours
            else ""
        )
        raise RunFolderError(
            f"{self.flag}: {self.path} holds files this run did not create: {shown}"
            + (f", ... and {more} more" if more > 0 else "")
            + older
            + "; a run writes only into a new or empty folder, or one an earlier run wrote "
            "(with its run.json): choose another folder"
        )

    def _lock(self) -> None:
        if fcntl is None:  # pragma: no cover - Windows
            return
        path = self.path / LOCK_FILENAME
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                raise RunFolderError(
                    f"{self.flag}: {self.path} is in use by another run ({_holder(path)}): "
                    "wait for it to finish, or choose another folder"
                ) from None
            # The holder before us may have removed the file as we opened it: lock the file
            # that is there now, or two runs would each hold a lock.
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "started": started}).encode())
        self._fd = fd

    def start(self, *, fresh: bool) -> None:
        """Rows are about to run. A ``fresh`` (not resumed) run removes an earlier run's
        journal and report from the folder (only ever files a run of ours wrote)."""
        self._started = True
        if fresh:
            for name in (JOURNAL_FILENAME, REPORT_FILENAME):
                (self.path / name).unlink(missing_ok=True)

    def write_run_file(
        self,
        *,
        config: Mapping[str, Any],
        selected: Sequence[str],
        finished: Mapping[str, Any] | None,
        kept: Sequence[str] = (),
        resume: Mapping[str, Any] | None = None,
    ) -> None:
        """Write ``run.json`` (under this run's id): what was asked, and how it ended."""
        write_run_file(
            self.path,
            config=config,
            selected=selected,
            finished=finished,
            resumed_from=kept,
            run_id=self.run_id,
            resume=resume,
        )

    def release(self) -> None:
        """Unlock the folder and remove the lock file (the run is over)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        # Removed while still locked: a run that opens it after us creates a new one.
        (self.path / LOCK_FILENAME).unlink(missing_ok=True)
        os.close(fd)

    def abandon(self) -> None:
        """Release the folder; if no row ran, remove what the claim created."""
        self.release()
        if self._started or self._created is None:
            return
        current = self.path
        while True:
            try:
                current.rmdir()
            except OSError:
                return  # something else is in it now: leave it
            if current == self._created:
                return
            current = current.parent


def _make_dirs(path: Path) -> Path:
    """``mkdir -p path``; the outermost folder it created."""
    outermost = path
    while not outermost.parent.exists() and outermost.parent != outermost:
        outermost = outermost.parent
    path.mkdir(parents=True, exist_ok=True)
    return outermost


def _holder(path: Path) -> str:
    """``pid 123, started 2026-01-01 12:00:00 UTC`` from a lock file (as far as it says)."""
    document = read_json_object(path)
    if document is None:
        return "pid unknown"
    return f"pid {document.get('pid', 'unknown')}, started {document.get('started', 'unknown')}"
