"""How a run ended: every row ran, or ``-x``/``--maxfail``/a signal stopped it first.

A stopped run must never look complete. :func:`how_it_ended` reads what stopped pytest
(the signal the session's handler saw, ``session.shouldfail`` for ``-x``/``--maxfail``,
``session.shouldstop`` for other plugins); the report then carries
``summary.complete: false``, ``stopped_by``, ``interrupted`` and the rows not run, and
:func:`incomplete_lines` says the same in the terminal summary.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

__all__ = ["EXIT_WRITE_FAILED", "how_it_ended", "incomplete_lines"]

EXIT_WRITE_FAILED = 12
"""The exit status of a run whose journal or report could not be written (a full disk).
pytest's own statuses run from 0 to 6; this one leaves room for more of theirs, and neither
0 nor 1 may stand for a result that is not on disk."""

SHOWN_NOT_RUN = 10
"""Row ids listed in the terminal before "... and N more"."""


def how_it_ended(
    session: pytest.Session, exitstatus: int, received_signal: str | None
) -> dict[str, Any]:
    """``{"stopped_by", "interrupted"}`` for ``run.json``'s ``finished`` record."""
    if received_signal is not None:
        return {"stopped_by": received_signal, "interrupted": True}
    if session.shouldfail:
        # Checked before an interrupt: pytest-xdist's controller ends a -x/--maxfail run by
        # raising its ``Interrupted`` (a KeyboardInterrupt), which is no signal.
        maxfail = int(getattr(session.config.option, "maxfail", 0) or 0)
        return {
            "stopped_by": "-x" if maxfail == 1 else f"--maxfail={maxfail}",
            "interrupted": False,
        }
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        # A KeyboardInterrupt no handler of ours saw: Ctrl-C before the rows started, or
        # raised by code under test.
        return {"stopped_by": "KeyboardInterrupt", "interrupted": True}
    if session.shouldstop:
        reason = session.shouldstop if isinstance(session.shouldstop, str) else "stopped"
        return {"stopped_by": reason, "interrupted": False}
    return {"stopped_by": None, "interrupted": False}


def _short(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1]


def incomplete_lines(summary: dict[str, Any], not_run: Sequence[str]) -> list[str]:
    """The terminal's account of an incomplete run (nothing for a complete one)."""
    if summary.get("complete", True):
        return []
    total = int(summary["rows"]["total"]) + len(not_run)
    stopped = summary.get("stopped_by")
    head = "INCOMPLETE: " + (f"stopped by {stopped}: " if stopped else "")
    line = f"{head}{len(not_run)} of {total} rows not run"
    if not_run:
        shown = ", ".join(_short(n) for n in not_run[:SHOWN_NOT_RUN])
        more = len(not_run) - SHOWN_NOT_RUN
        line += f": {shown}" + (f", ... and {more} more" if more > 0 else "")
    lines = [line]
    lines.append(
        "  the rows not run have no result; this report is partial (not a baseline unless "
        "--osmosis-allow-partial-baseline); resume with --osmosis-resume <output dir>"
    )
    return lines
