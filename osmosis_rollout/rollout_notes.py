"""What a rollout said while it ran: its log records, the judge's explanations, its metrics.

A failing row must say why in the grader's own words, on that row and nowhere else.
:func:`~osmosis_rollout.execution.execute_in_process` gives each rollout its
:class:`RolloutNotes` (:func:`notes_for`, a context variable of the rollout's task, since the
grader runs outside the ambient rollout context); while notes are being taken
(:func:`taking_notes`), a handler on the root logger files every log record
made inside a rollout (its task, or a thread started from it with its context) under that
rollout's notes, split by phase (workflow or grader). :func:`~osmosis_rollout.rubric.evaluate_rubric`
adds each verdict's score and explanation, with no change to the grader's code. Records made
outside any rollout are left alone. Notes are bounded: past :data:`MAX_NOTE_CHARS` a phase
keeps its first lines and says how much was left out.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from osmosis_rollout.context import RolloutProgress
from osmosis_rollout.types import RolloutStatus

__all__ = [
    "MAX_NOTE_CHARS",
    "RolloutNotes",
    "current_notes",
    "noted_here",
    "notes_for",
    "taking_notes",
]

MAX_NOTE_CHARS = 64 * 1024
"""What one phase's notes keep of its log lines: a grader logging in a loop cannot fill memory."""

_FORMAT = logging.Formatter("%(levelname)s %(name)s: %(message)s")

PLUMBING_LOGGERS = (
    "osmosis_rollout",
    "httpx",
    "httpcore",
    "openai",
    "LiteLLM",
    "litellm",
    "asyncio",
)
"""Loggers whose records say how a call travelled, not why a row passed or failed: left out
of notes (``osmosis_rollout``'s own go to ``rollouts.log``; the rest to wherever logging
sends them, as without notes)."""


@dataclass
class RolloutNotes:
    """One rollout's notes: lines it logged per phase, and its judge's verdicts."""

    workflow: list[str] = field(default_factory=list)
    grader: list[str] = field(default_factory=list)
    rubric: list[dict[str, Any]] = field(default_factory=list)
    """``{"score": ..., "explanation": ...}`` of each ``evaluate_rubric`` made in the rollout."""
    _chars: dict[str, int] = field(default_factory=dict, repr=False)
    _left_out: dict[str, int] = field(default_factory=dict, repr=False)

    def add_line(self, phase: str, line: str) -> None:
        """Keep ``line`` under ``phase`` (``"workflow"`` or ``"grader"``), within the bound."""
        used = self._chars.get(phase, 0)
        if used + len(line) > MAX_NOTE_CHARS:
            self._left_out[phase] = self._left_out.get(phase, 0) + 1
            return
        self._chars[phase] = used + len(line)
        (self.grader if phase == "grader" else self.workflow).append(line)

    def add_verdict(self, score: float, explanation: str) -> None:
        """Keep one judge verdict (``evaluate_rubric``'s score and explanation)."""
        self.rubric.append({"score": score, "explanation": explanation})

    def lines(self, phase: str) -> list[str]:
        """The lines of ``phase``, with a last line saying how many were left out, if any."""
        lines = list(self.grader if phase == "grader" else self.workflow)
        left_out = self._left_out.get(phase, 0)
        if left_out:
            lines.append(f"... {left_out} more lines left out (past {MAX_NOTE_CHARS} chars)")
        return lines

    def grader_reason(self) -> str:
        """The grader's words: each judge explanation, then the lines it logged."""
        parts = [
            f"judge: score {verdict['score']}: {verdict['explanation']}".rstrip()
            for verdict in self.rubric
        ]
        parts.extend(self.lines("grader"))
        return "\n".join(parts)

    def workflow_log(self) -> str:
        """What the workflow logged, one record a line."""
        return "\n".join(self.lines("workflow"))


_current: ContextVar[tuple[RolloutNotes, RolloutProgress | None] | None] = ContextVar(
    "osmosis_rollout_notes", default=None
)


@contextlib.contextmanager
def notes_for(notes: RolloutNotes, progress: RolloutProgress | None) -> Iterator[RolloutNotes]:
    """Within this block (and tasks or threads started in it), records and verdicts go to
    ``notes``; ``progress`` tells the workflow's records from the grader's."""
    token = _current.set((notes, progress))
    try:
        yield notes
    finally:
        # A rollout coroutine closed by the garbage collector after its loop stopped ends
        # in another context, where the token means nothing (that context dies with it).
        with contextlib.suppress(ValueError):
            _current.reset(token)


def current_notes() -> RolloutNotes | None:
    """The notes of the rollout the caller runs in, or ``None`` outside one."""
    current = _current.get()
    return current[0] if current is not None else None


def noted_here() -> bool:
    """True when a record made here, now, goes to a rollout's notes (a filter asks this to
    keep such records out of other places, e.g. pytest's captured-log sections)."""
    return bool(_installed) and _current.get() is not None


class _NotesHandler(logging.Handler):
    """Files each record made inside a rollout under that rollout's notes and phase."""

    def emit(self, record: logging.LogRecord) -> None:
        current = _current.get()
        if current is None or record.name.split(".", 1)[0] in PLUMBING_LOGGERS:
            return
        notes, progress = current
        grading = progress is not None and progress.status is RolloutStatus.GRADING
        try:
            line = _FORMAT.format(record)
        except Exception:  # a record whose arguments do not format: keep what it said
            line = f"{record.levelname} {record.name}: {record.msg!r}"
        notes.add_line("grader" if grading else "workflow", line)

    def handleError(self, record: logging.LogRecord) -> None:
        # Never print a traceback to stderr: with stderr captured, that is another record.
        return


_lock = threading.Lock()
_installed: list[_NotesHandler] = []


@contextlib.contextmanager
def taking_notes() -> Iterator[None]:
    """Within this block, log records made inside a rollout with notes go to its notes.

    Nested or concurrent uses share one handler on the root logger; the last to leave
    removes it. Records keep reaching every other handler as before.
    """
    with _lock:
        if not _installed:
            handler = _NotesHandler(level=logging.NOTSET)
            logging.getLogger().addHandler(handler)
            _installed.append(handler)
        else:
            _installed.append(_installed[0])
    try:
        yield
    finally:
        with _lock:
            handler = _installed.pop()
            if not _installed:
                logging.getLogger().removeHandler(handler)
