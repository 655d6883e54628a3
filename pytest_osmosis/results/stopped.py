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

from osmosis_rollout.runs.run_verdict import EXIT_WRITE_FAILED

__all__ = ["EXIT_WRITE_FAILED", "how_it_ended", "incomplete_lines"]

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
        flag = "-x" if maxfail == 1 else f"--maxfail={maxfail}"
        return {"stopped_by": flag, "interrupted": False}
    stopped_by = _stop_reason(session)
    if exitstatus == pytest.ExitCode.INTERRUPTED and stopped_by is None:
        # A KeyboardInterrupt no handler of ours saw: Ctrl-C before the rows started, or
        # raised by code under test. (A plugin's reason to stop exits INTERRUPTED too.)
        return {"stopped_by": "KeyboardInterrupt", "interrupted": True}
    if stopped_by is None and session.shouldstop:
        stopped_by = "stopped"  # a plugin stopped the run without saying why
    return {"stopped_by": stopped_by, "interrupted": False}


def _stop_reason(session: pytest.Session) -> str | None:
    """Why a plugin stopped the run (``session.shouldstop``; under pytest-xdist, the reason a
    worker gave, which the controller's ``dsession`` keeps), or None."""
    if isinstance(session.shouldstop, str) and session.shouldstop:
        return session.shouldstop
    dsession = session.config.pluginmanager.getplugin("dsession")
    reason = getattr(dsession, "shouldstop", None)
    if isinstance(reason, str) and reason and not reason.endswith("received keyboard-interrupt"):
        return reason
    return None


def incomplete_lines(summary: dict[str, Any], not_run: Sequence[str]) -> list[str]:
    """The terminal's account of an incomplete run (nothing for a complete one)."""
    if summary.get("complete", True):
        return []
    total = int(summary["rows"]["total"]) + len(not_run)
    stopped = summary.get("stopped_by")
    by = f"stopped by {stopped}: " if stopped else ""
    line = f"INCOMPLETE: {by}{len(not_run)} of {total} rows not run"
    if not_run:
        more = len(not_run) - SHOWN_NOT_RUN
        line += ": " + ", ".join(nodeid.rsplit("::", 1)[-1] for nodeid in not_run[:SHOWN_NOT_RUN])
        line += f", ... and {more} more" if more > 0 else ""
    return [
        line,
        "  the rows not run have no result; this report is partial (not a baseline unless "
        "--osmosis-allow-partial-baseline); resume with --osmosis-resume <output dir>",
    ]
