"""The run's output paths: checked before any row runs, written without hiding the results.

At start-up every path the run will write (``--osmosis-output``, ``--osmosis-report``,
``--osmosis-html``, ``--osmosis-markdown``, ``--junitxml``) is checked: one that cannot be
written (under a plain file, a directory, no permission), that names one of the run's inputs
(the dataset, the policy, the baseline, a cassette...) or a file of the run folder, or that
another output names too, is a usage error naming the flag, the path and why. At the end, a file
that still cannot be written is one line after the summary, and the run exits 12
(:data:`~pytest_osmosis.results.stopped.EXIT_WRITE_FAILED`): its outcome is not on disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from osmosis_rollout.runs.journal import (
    JOURNAL_FILENAME,
    ROLLOUTS_LOG,
    RUN_FILENAME,
    TRAJECTORIES_DIR,
)
from pytest_osmosis.results.run_folder import LOCK_FILENAME, REPORT_FILENAME

__all__ = [
    "Input",
    "OutputWrite",
    "check_output_paths",
    "refuse_overwrites",
    "why_unwritable",
    "write_outputs",
]


@dataclass(frozen=True)
class Input:
    """A file or folder the run reads (or writes itself), which no other output may overwrite."""

    what: str
    """What it is, for the message: ``the dataset``, ``the cassettes folder``."""
    path: Path
    folder: bool = False
    """A folder: nothing inside it may be written either."""
    verb: str = "reads"
    """``writes`` for the run's own files (its journal), which no other output may replace."""

    def holds(self, path: Path) -> bool:
        """True when writing ``path`` would overwrite this input."""
        mine, theirs = self.path.resolve(), path.resolve()
        return theirs == mine or (self.folder and theirs.is_relative_to(mine))


def why_unwritable(path: Path, *, directory: bool) -> str | None:
    """Why ``path`` (a file, or a directory when ``directory``) could not be written; else None."""
    if path.exists():
        if directory and not path.is_dir():
            return f"{path} is a file, not a directory"
        if not directory and path.is_dir():
            return f"{path} is a directory"
        target = path if path.is_dir() else path.parent
        if not os.access(path, os.W_OK) or not os.access(target, os.W_OK | os.X_OK):
            return f"{path} is not writable (permission denied)"
        return None
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is a file, not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        first = path.relative_to(ancestor).parts[0]
        return f"cannot create {first} in {ancestor} (permission denied)"
    return None


def check_output_paths(
    config: pytest.Config,
    *,
    output: Path | None,
    report: Path | None,
    html: Path | None,
    markdown: Path | None = None,
    inputs: Sequence[Input] = (),
) -> None:
    """Raise ``pytest.UsageError`` for the first output path that cannot be written, that
    names one of the run's ``inputs`` or a file of the run folder, or that another output
    names too."""
    base = Path(config.invocation_params.dir)
    junit = getattr(config.option, "xmlpath", None)
    checks: list[tuple[str, Path | None, bool]] = [
        ("--osmosis-output", output, True),
        ("--osmosis-report", report, False),
        ("--osmosis-html", html, False),
        ("--osmosis-markdown", markdown, False),
        ("--junitxml", base / Path(junit).expanduser() if junit else None, False),
    ]
    owned = _run_files(output) if output is not None else []
    # Each file output's path -> who writes it: two outputs on one path overwrite each other.
    # The run's own report.json may be named by --osmosis-report too (one report, one file).
    written = {} if output is None else {(output / REPORT_FILENAME).resolve(): "--osmosis-output"}
    for flag, path, directory in checks:
        if path is None:
            continue
        shown = path.relative_to(base) if path.is_relative_to(base) else path
        for read in () if directory else [*inputs, *owned]:
            if read.holds(path):
                where = "inside " if read.folder else ""
                raise pytest.UsageError(
                    f"{flag}: {shown} is {where}{read.what} this run {read.verb}; "
                    "writing there would overwrite it: choose another path"
                )
        if not directory:
            writer = written.setdefault(path.resolve(), flag)
            same_report = writer == "--osmosis-output" and flag == "--osmosis-report"
            if writer != flag and not same_report:
                what = "its report" if writer == "--osmosis-output" else "its file"
                raise pytest.UsageError(
                    f"{flag}: {shown} is where {writer} writes {what}; two outputs on one "
                    "path would overwrite each other: choose another path"
                )
        reason = why_unwritable(path, directory=directory)
        if reason is not None:
            raise pytest.UsageError(
                f"{flag}: cannot write {path}: {reason}; choose another path or remove what is in the way"
            )


def _run_files(output: Path) -> list[Input]:
    """The run folder and its own files, which only the run writes (a report on the
    folder's own path could only fail at the end, once every row had run)."""
    return [
        Input("the run folder", output, verb="writes"),
        Input("the journal", output / JOURNAL_FILENAME, verb="writes"),
        Input("the run file", output / RUN_FILENAME, verb="writes"),
        Input("the rollouts' log", output / ROLLOUTS_LOG, verb="writes"),
        Input("the lock", output / LOCK_FILENAME, verb="writes"),
        Input("the trajectories folder", output / TRAJECTORIES_DIR, folder=True, verb="writes"),
    ]


def refuse_overwrites(files: list[tuple[str, Path | None]], *, overwrite: bool) -> None:
    """Raise ``pytest.UsageError`` (exit 4) for the first report, HTML or markdown file an
    earlier run wrote (a baseline kept there, say), unless ``overwrite``
    (``--osmosis-overwrite``)."""
    if overwrite:
        return
    for flag, path in files:
        if path is not None and path.is_file():
            raise pytest.UsageError(
                f"{flag}: {path} exists (an earlier run wrote it); pass --osmosis-overwrite "
                "to replace it, or choose another path"
            )


@dataclass(frozen=True)
class OutputWrite:
    """One file to write at the end: what it is (for the message), where, and how."""

    what: str
    shown: str
    """The path as the user gave it (or the default), for the message."""
    write: Callable[[], None]


def write_outputs(writes: list[OutputWrite]) -> tuple[list[str], list[str]]:
    """Run every write; return the paths written (as shown) and one line per write that failed."""
    written: list[str] = []
    failures: list[str] = []
    for item in writes:
        try:
            item.write()
        except OSError as exc:
            which = f" ({exc.filename})" if exc.filename else ""
            reason = f"{exc.strerror or exc}{which}"
            failures.append(f"osmosis: could not write the {item.what} {item.shown}: {reason}")
        else:
            written.append(item.shown)
    return written, failures
