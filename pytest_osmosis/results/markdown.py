"""The run's summary as markdown for a CI job's page: the verdict, each gate's line, the worst
rows with their reasons and what changed against the baseline.

It reads the report's head and the rows that missed as pytest reported them, so it says what the
exit status, JUnit and ``report.json`` say. Written to ``--osmosis-markdown PATH`` and appended
to ``$GITHUB_STEP_SUMMARY`` when GitHub Actions sets it (:data:`STEP_SUMMARY_ENV`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from osmosis_rollout.runs.report_text import baseline_counts, interval_text

__all__ = ["SHOWN_ROWS", "STEP_SUMMARY_ENV", "RowMiss", "append_markdown", "render_markdown"]

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
"""The file GitHub Actions shows on the job's summary page (appended to, never replaced)."""

SHOWN_ROWS = 20
"""Rows the markdown lists (errored first); report.json and the HTML have every one."""

_MARK = {"passed": "✅", "failed": "❌", "incomplete": "⏸️", "tolerated": "⚠️"}


@dataclass(frozen=True)
class RowMiss:
    """A row that missed, as its report said it."""

    nodeid: str
    reason: str
    """The first line of its failure (or of its expected failure's reason)."""
    errored: bool
    """A rollout of the row errored (no reward)."""
    tolerated: bool
    """A pass-rate gate counted it: an expected failure, not a failed test."""


def _cell(text: Any) -> str:
    """``text`` safe in a table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def render_markdown(head: dict[str, Any], misses: Sequence[RowMiss]) -> str:
    """The summary of the run whose report head is ``head``."""
    verdict = head.get("verdict") or {}
    outcome = str(verdict.get("outcome", "unknown"))
    rows = (head.get("summary") or {}).get("rows") or {}
    lines = [
        f"## pytest-osmosis: {_MARK.get(outcome, '')} {outcome}".replace("  ", " "),
        "",
        f"exit status {verdict.get('exit_status')} · {rows.get('total', 0)} rows · pass rate "
        f"{float(rows.get('pass_rate') or 0):.1%}{interval_text(rows.get('pass_rate_interval'))}"
        + (f" · run `{head['run_id']}`" if head.get("run_id") else ""),
        "",
        "| | what the verdict read |",
        "|---|---|",
    ]
    for reason in verdict.get("reasons") or []:
        mark = _MARK.get(str(reason.get("outcome")), "")
        lines.append(f"| {mark} {_cell(reason.get('kind'))} | {_cell(reason.get('line'))} |")
    if misses:
        lines += ["", f"### Rows that missed ({len(misses)})", "", "| row | why |", "|---|---|"]
    # Errored rows first (the rollout itself broke), then those below the threshold.
    for miss in sorted(misses, key=lambda miss: not miss.errored)[:SHOWN_ROWS]:
        how = "errored" if miss.errored else "below threshold"
        if miss.tolerated:
            how += ", counted by the gate"
        lines.append(f"| `{_cell(miss.nodeid)}` | {how}: {_cell(miss.reason)} |")
    if len(misses) > SHOWN_ROWS:
        lines.append(f"| ... | and {len(misses) - SHOWN_ROWS} more (see report.json) |")
    if isinstance(baseline := head.get("baseline"), dict):
        lines += _baseline(baseline)
    return "\n".join(lines) + "\n"


def _baseline(baseline: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "### Against the baseline",
        "",
        baseline_counts(baseline)
        + (f" (baseline `{baseline['path']}`)" if baseline.get("path") else ""),
    ]
    test = baseline.get("test")
    if isinstance(test, dict) and "p_value" in test:
        significance = "significant" if test.get("significant") else "not significant"
        lines.append(
            f"paired test: {test.get('worse')} rows worse, {test.get('better')} better: "
            f"{significance} (p = {float(test['p_value']):.2g}, {test.get('method')})"
        )
    deltas = baseline.get("reward_deltas") or {}
    regressed = (baseline.get("regressed") or [])[:SHOWN_ROWS]
    if regressed:
        lines.append("")
    for nodeid in regressed:
        change = f", reward change {deltas[nodeid]:+g}" if nodeid in deltas else ""
        lines.append(f"- regressed `{nodeid}`: passed -> failed{change}")
    for nodeid in (baseline.get("improved") or [])[:SHOWN_ROWS]:
        lines.append(f"- improved `{nodeid}`: failed -> passed")
    return lines


def append_markdown(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` (a job summary holds every step's, one after another)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write(text + "\n")
