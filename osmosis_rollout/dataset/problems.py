"""Problems found in a dataset, collected into one :class:`~osmosis_rollout.errors.DatasetError`."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from osmosis_rollout.errors import DatasetError

__all__ = [
    "MAX_REPORTED_ERRORS",
    "Collector",
    "Fatal",
    "Problem",
    "combine",
    "counted",
    "json_type",
    "problem_lines",
    "short_columns",
    "suggest",
]

MAX_REPORTED_ERRORS = 5
TRUNCATED_NOTE = f"... (showing first {MAX_REPORTED_ERRORS} errors)"


@dataclass(frozen=True, slots=True)
class Problem:
    message: str
    row: int | None = None
    column: str | None = None
    fix: str | None = None

    def error(self, path: str) -> DatasetError:
        return DatasetError(self.message, path=path, row=self.row, column=self.column, fix=self.fix)


class Fatal(Exception):
    """Reading cannot go on (the file, header or schema is unusable): ``problem`` says why
    (a message, with the row and fix, makes one)."""

    def __init__(self, problem: Problem | str, *, row: int | None = None, fix: str | None = None):
        self.problem = Problem(problem, row=row, fix=fix) if isinstance(problem, str) else problem
        super().__init__(self.problem.message)


class Collector:
    """Keeps the first few problems; reports whether one more was seen."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.problems: list[Problem] = []
        self.truncated = False

    def add(self, problem: Problem) -> None:
        if len(self.problems) < MAX_REPORTED_ERRORS:
            self.problems.append(problem)
        else:
            self.truncated = True

    def extend(self, problems: Iterable[Problem]) -> None:
        for problem in problems:
            self.add(problem)

    def errors(self) -> list[DatasetError]:
        return [problem.error(self.path) for problem in self.problems]


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def problem_lines(path: str, errors: list[DatasetError], truncated: bool) -> list[str]:
    """One line per error, without the leading file name (the heading above has it)."""
    lines = []
    for error in errors:
        text = str(error)
        prefix = next((p for p in (f"{path}, ", f"{path}: ") if text.startswith(p)), "")
        lines.append("  - " + text.removeprefix(prefix).replace("\n", "\n    "))
    return [*lines, f"  {TRUNCATED_NOTE}"] if truncated else lines


def combine(path: str, errors: list[DatasetError], truncated: bool) -> DatasetError:
    if len(errors) == 1 and not truncated:
        return errors[0]
    lines = [f"{counted(len(errors), 'problem')} in this dataset:"]
    lines += problem_lines(path, errors, truncated)
    return DatasetError("\n".join(lines), path=path)


def suggest(name: str, candidates: Iterable[str]) -> str:
    """`` (found 'User_Prompt': ...case-sensitive)``, `` (did you mean 'prompt'?)`` or ``""``."""
    names = [str(candidate) for candidate in candidates]
    lowered = {candidate.lower(): candidate for candidate in names}
    if name.lower() in lowered:
        return f" (found {lowered[name.lower()]!r}: column names are case-sensitive)"
    matches = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return f" (did you mean {matches[0]!r}?)" if matches else ""


def short_columns(columns: Iterable[str]) -> str:
    names = sorted(columns)
    shown = ", ".join(repr(name) for name in names[:8])
    return shown + (f", ... ({len(names)} in all)" if len(names) > 8 else "") if names else "none"


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__
