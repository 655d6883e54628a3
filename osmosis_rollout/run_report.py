"""A run's JSON report, built from its journal: the summary, the rows and what did not run.

The same function builds the report at the end of a pytest run and rebuilds it afterwards
from the files on disk (``osmosis-rollout report rebuild RUN_DIR``), so a run that was
killed half way still gets a truthful report: the rows that finished, and the ids of those
that never ran.

Summary keys: the official ``metrics.json`` keys (see :func:`~osmosis_rollout.metrics.aggregate`)
plus ``rows`` (row-level counts, ``not_run`` included), ``errors_by_type``,
``tokens_estimated``, ``rollouts_wall_s``, and how complete the run is: ``complete`` (every
selected row has a result and no signal or crash ended the run), ``interrupted`` (a signal
or a crash ended it), ``stopped_by`` (``"-x"``, ``"--maxfail=N"``, ``"SIGINT"``,
``"SIGTERM"``, ``"killed"`` or ``None``) and ``not_run`` (how many selected rows have no
result; the document's top-level ``not_run`` lists their ids).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from osmosis_rollout.metrics import aggregate
from osmosis_rollout.run_journal import (
    JOURNAL_FILENAME,
    JournalRow,
    read_journal,
    read_run_file,
)

__all__ = [
    "REPORT_SCHEMA",
    "STOPPED_BY_KILLED",
    "build_report",
    "rebuild_report",
    "report_head",
    "row_errored",
    "row_verdict_entry",
    "summarize",
]

REPORT_SCHEMA = "pytest-osmosis/report/v1"
STOPPED_BY_KILLED = "killed"
"""``stopped_by`` of a run whose process died before recording how it ended."""


def row_errored(verdict: str, attempts: Sequence[Mapping[str, Any]]) -> bool:
    """A failed row whose rollouts errored (at least one attempt has no reward because it failed)."""
    return verdict == "failed" and any(a.get("status") == "failed" for a in attempts)


def summarize(
    rows: Sequence[JournalRow],
    pass_threshold: float,
    *,
    not_run: Sequence[str] = (),
    finished: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report's ``summary`` for ``rows`` (in item order) and the rows that did not run."""
    attempts = [a for r in rows for a in r.attempts]
    summary = aggregate(attempts, pass_threshold)
    verdicts = Counter(r.verdict for r in rows)
    scored_rows = verdicts["passed"] + verdicts["failed"]
    summary["rows"] = {
        "total": len(rows),
        "passed": verdicts["passed"],
        "failed": verdicts["failed"],
        # The failed rows whose rollouts errored (no reward), not merely scored low.
        "errored": sum(1 for r in rows if row_errored(r.verdict, r.attempts)),
        "skipped": verdicts["skipped"],
        "pass_rate": (verdicts["passed"] / scored_rows) if scored_rows else 0,
        "not_run": len(not_run),
    }
    errors = Counter(a.get("error_type") for a in attempts if a.get("status") == "failed")
    summary["errors_by_type"] = dict(errors.most_common())
    summary["tokens_estimated"] = any(a.get("tokens_estimated") for a in attempts)
    costs = [a["cost_usd"] for a in attempts if a.get("cost_usd") is not None]
    # None when nothing was priced (a scripted policy and no --osmosis-price-in/-out).
    summary["cost_usd"] = round(sum(costs), 10) if costs else None
    summary["cost_estimated"] = any(a.get("cost_estimated") for a in attempts)
    timed = [a for a in attempts if a.get("started_at")]
    if timed:
        first = min(a["started_at"] for a in timed)
        last = max(a["started_at"] + a.get("duration_ms", 0) / 1000.0 for a in timed)
        # Wall time from the first rollout's start to the last one's end: what concurrency buys.
        summary["rollouts_wall_s"] = round(last - first, 3)
    if finished is None:
        summary["interrupted"] = True
        summary["stopped_by"] = STOPPED_BY_KILLED
    else:
        summary["interrupted"] = bool(finished.get("interrupted"))
        summary["stopped_by"] = finished.get("stopped_by")
    summary["not_run"] = len(not_run)
    # A run that a signal or a crash ended may have rows no one selected yet (pytest-xdist
    # workers own their queues), so only a run that ended on its own can be complete.
    summary["complete"] = not not_run and not summary["interrupted"]
    return summary


def build_report(
    rows: Sequence[JournalRow],
    *,
    pass_threshold: float,
    selected: Sequence[str],
    finished: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    preflight: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The report document: rows in ``selected`` order (others after), and the ids not run."""
    document, ordered = report_head(
        rows,
        pass_threshold=pass_threshold,
        selected=selected,
        finished=finished,
        config=config,
        preflight=preflight,
    )
    document["rows"] = [a for r in ordered for a in r.attempts]
    document["row_verdicts"] = [row_verdict_entry(r) for r in ordered]
    return document


def report_head(
    rows: Sequence[JournalRow],
    *,
    pass_threshold: float,
    selected: Sequence[str],
    finished: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    preflight: Sequence[Mapping[str, Any]] = (),
) -> tuple[dict[str, Any], list[JournalRow]]:
    """:func:`build_report` with its per-row lists (``rows``, ``row_verdicts``) left empty,
    and the rows in report order: a writer can then stream those lists row by row."""
    position = {nodeid: i for i, nodeid in enumerate(selected)}
    ordered = sorted(rows, key=lambda r: position.get(r.nodeid, len(position)))
    done = {r.nodeid for r in rows}
    not_run = [nodeid for nodeid in selected if nodeid not in done]
    document = {
        "schema": REPORT_SCHEMA,
        "summary": summarize(ordered, pass_threshold, not_run=not_run, finished=finished),
        "rows": [],
        "row_verdicts": [],
        "not_run": not_run,
        "preflight": [dict(p) for p in preflight],
        "config": dict(config),
    }
    return document, ordered


def row_verdict_entry(row: JournalRow) -> dict[str, Any]:
    """A row's entry in the report's ``row_verdicts``: who it is, its verdict, its statistics."""
    return {
        "nodeid": row.nodeid,
        "dataset": row.dataset,
        "row_key": row.row_key,
        "verdict": row.verdict,
        **row.stats,
    }


def rebuild_report(run_dir: Path) -> tuple[dict[str, Any], int]:
    """The report of the run in ``run_dir`` from its ``run.json`` and ``rows.jsonl``.

    Returns the document and the number of unreadable journal lines (a torn last line of a
    killed run). Raises :class:`~osmosis_rollout.run_journal.RunJournalError` when
    ``run_dir`` is not a run directory.
    """
    run = read_run_file(run_dir)
    rows, bad = read_journal(run_dir / JOURNAL_FILENAME)
    config = run.get("config") or {}
    threshold = config.get("pass_threshold")
    document = build_report(
        rows,
        pass_threshold=float(threshold) if isinstance(threshold, int | float) else 1.0,
        selected=list(run.get("selected") or []),
        finished=run.get("finished"),
        config=config,
        preflight=(run.get("finished") or {}).get("preflight") or (),
    )
    return document, bad
