"""Rows that failed the same way, shown once: ``12 rows failed the same way: ...``.

A raising policy or a missing grader fails every row with the same text, which pytest would
print a dozen times. The controller groups the failed rows by what failed (the error's type,
phase, message and the user's frame; or why no grader ran), keeps each group's first report in
full and turns the later ones into a line pointing at it. JUnit and the report files keep every
row's full text: they were written from the reports as they arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["FailureGroups"]

_MAX_SHOWN_CHARS = 300


def _what_failed(value: dict[str, Any]) -> tuple[tuple[Any, ...], str] | None:
    """What a failed row's failure is, for grouping, and one line saying it and where; None
    for a row that is not grouped (a reward below the threshold: each row's answer differs)."""
    shown = next((a for a in value.get("attempts") or [] if not a.get("passed")), None)
    if shown is None:
        return None
    if shown.get("status") == "success" and shown.get("reward") is None:
        why = shown.get("ungraded")
        return ("ungraded", why), f"no grader ran ({why or 'not_graded'}): no reward"
    if shown.get("status") != "failed":
        return None
    phase, where = shown.get("error_phase"), shown.get("error_where")
    key = ("failed", shown.get("error_type"), phase, shown.get("err_message"), where)
    who = f"the {phase} failed" if phase else "rollout failed"
    text = " ".join(f"{who} [{shown.get('error_type')}]: {shown.get('err_message') or ''}".split())
    if len(text) > _MAX_SHOWN_CHARS:
        text = text[: _MAX_SHOWN_CHARS - 3] + "..."
    return key, f"{text} (at {where})" if where else text


class _SameAs:
    """A later row's report: one line pointing at the first row that failed the same way (pytest
    draws a ``longrepr`` with ``toterminal``; its short summary reads ``reprcrash.message``)."""

    def __init__(self, text: str) -> None:
        self.message = text
        self.reprcrash = self

    def toterminal(self, tw: Any) -> None:
        tw.line(self.message)

    def __str__(self) -> str:
        return self.message


@dataclass
class _Group:
    description: str
    reports: list[pytest.TestReport] = field(default_factory=list)


@dataclass
class FailureGroups:
    """The failed rows' reports by what failed (controller only)."""

    redact: Callable[[str], str] = str
    """Keeps secrets out of the descriptions (the records on reports are not redacted)."""
    groups: dict[tuple[Any, ...], _Group] = field(default_factory=dict)

    def add(self, report: pytest.TestReport, value: dict[str, Any]) -> None:
        """Note a row's call report (``value`` is its record as the report carries it)."""
        if not report.failed or (failure := _what_failed(value)) is None:
            return
        key, description = failure
        if key not in self.groups:
            self.groups[key] = _Group(self.redact(description))
        self.groups[key].reports.append(report)

    def repeated(self) -> list[_Group]:
        """The groups of two rows or more, largest first."""
        return sorted(
            (g for g in self.groups.values() if len(g.reports) > 1), key=lambda g: -len(g.reports)
        )

    def shorten_repeats(self) -> None:
        """Keep each group's first report in full; make the others one line pointing at it."""
        for group in self.repeated():
            first = group.reports[0]
            for report in group.reports[1:]:
                report.longrepr = _SameAs(  # type: ignore[assignment]
                    f"{_row(report)}: failed the same way as {_row(first)} (shown in full "
                    f"above): {group.description}"
                )

    def lines(self) -> list[str]:
        """The summary's lines: ``12 rows failed the same way: ...`` for each group."""
        return [
            f"{len(g.reports)} rows failed the same way: {g.description}; "
            f"full text under {_row(g.reports[0])}"
            for g in self.repeated()
        ]


def _row(report: pytest.TestReport) -> str:
    """The row's name as the failures section heads it (``row-3``)."""
    return report.head_line or report.nodeid
