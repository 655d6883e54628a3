"""Rows that failed the same way, shown once: ``12 rows failed the same way: ...``.

A raising policy or a missing grader fails every row with the same text; pytest prints each
failed item's report in full, so the cause scrolls by a dozen times. Here the controller
groups the failed rows by what failed (the error's type, phase, message and the user's
frame; or why no grader ran), keeps the first report of a group in full, and turns each later
one into a line pointing at it. JUnit and the report files keep every row's full text: they
were written from the reports as they arrived, before this shortens them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

__all__ = ["FailureGroups"]

_MAX_SHOWN_CHARS = 300


def _shown_attempt(attempts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The attempt a row's failure shows: its first that did not pass."""
    return next((a for a in attempts if not a.get("passed")), None)


def signature(value: dict[str, Any]) -> tuple[Any, ...] | None:
    """What a failed row's failure is, for grouping; None for a row that is not grouped (a
    reward below the threshold: each row's answer differs)."""
    attempts = value.get("attempts") or []
    shown = _shown_attempt(attempts)
    if shown is None:
        return None
    if shown.get("status") == "failed":
        return (
            "failed",
            shown.get("error_type"),
            shown.get("error_phase"),
            shown.get("err_message"),
            shown.get("error_where"),
        )
    if shown.get("status") == "success" and shown.get("reward") is None:
        return ("ungraded", shown.get("ungraded"))
    return None


def describe(value: dict[str, Any]) -> str:
    """One line for a group: what failed, and where."""
    shown = _shown_attempt(value.get("attempts") or []) or {}
    if shown.get("status") == "failed":
        phase = shown.get("error_phase")
        who = f"the {phase} failed" if phase else "rollout failed"
        text = f"{who} [{shown.get('error_type')}]: {shown.get('err_message') or ''}".rstrip()
        text = " ".join(text.split())
        if len(text) > _MAX_SHOWN_CHARS:
            text = text[: _MAX_SHOWN_CHARS - 3] + "..."
        where = shown.get("error_where")
        return f"{text} (at {where})" if where else text
    why = shown.get("ungraded") or "not_graded"
    return f"no grader ran ({why}): no reward"


class _SameAs:
    """A later row's report: one line pointing at the first row that failed the same way.

    pytest draws a report's ``longrepr`` through its ``toterminal`` and reads the short
    summary's message from ``reprcrash.message``.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.reprcrash = self  # the short summary reads reprcrash.message
        self.message = text

    def toterminal(self, tw: Any) -> None:
        tw.line(self.text)

    def __str__(self) -> str:
        return self.text


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
        if not report.failed:
            return
        key = signature(value)
        if key is None:
            return
        group = self.groups.get(key)
        if group is None:
            group = self.groups[key] = _Group(self.redact(describe(value)))
        group.reports.append(report)

    def repeated(self) -> list[_Group]:
        """The groups of two rows or more, largest first."""
        return sorted(
            (g for g in self.groups.values() if len(g.reports) > 1),
            key=lambda g: -len(g.reports),
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
