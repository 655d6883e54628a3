"""A run's JSON report, built from its journal: the summary, the rows and what did not run.

The same function builds the report at the end of a pytest run and rebuilds it afterwards
from the files on disk (``osmosis-rollout report rebuild RUN_DIR``), so a run that was
killed half way still gets a truthful report: the rows that finished, and the ids of those
that never ran.

Summary keys: the official ``metrics.json`` keys (see :func:`~osmosis_rollout.runs.metrics.aggregate`)
plus ``rows`` (row-level counts, ``not_run`` included), ``errors_by_type``,
``tokens_estimated``, ``rollouts_wall_s``, and how complete the run is: ``complete`` (every
selected row has a result and no signal or crash ended the run), ``interrupted`` (a signal
or a crash ended it), ``stopped_by`` (``"-x"``, ``"--maxfail=N"``, ``"SIGINT"``,
``"SIGTERM"``, ``"killed"`` or ``None``) and ``not_run`` (how many selected rows have no
result; the document's top-level ``not_run`` lists their ids).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from osmosis_rollout.runs.gating import summary_intervals
from osmosis_rollout.runs.journal import JOURNAL_FILENAME, read_journal, read_run_file
from osmosis_rollout.runs.metrics import aggregate
from osmosis_rollout.runs.report_model import REPORT_SCHEMA, RowRecord
from osmosis_rollout.runs.run_verdict import decide

__all__ = [
    "REPORT_SCHEMA",
    "STOPPED_BY_KILLED",
    "build_report",
    "in_report_order",
    "rebuild_report",
    "report_document",
    "report_head",
    "summarize",
    "tool_version",
]

STOPPED_BY_KILLED = "killed"
"""``stopped_by`` of a run whose process died before recording how it ended."""


def row_ungraded(row: RowRecord) -> bool:
    """A row whose rollouts all ran and none was graded (no reward, not removed)."""
    return (
        row.verdict != "skipped"
        and bool(row.attempts)
        and all(a.status == "success" and a.reward is None for a in row.attempts)
    )


def summarize(
    rows: Iterable[RowRecord],
    pass_threshold: float,
    *,
    not_run: Sequence[str] = (),
    finished: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report's ``summary`` for ``rows`` (in item order) and the rows that did not run.

    ``rows`` is read once, one row at a time.
    """
    verdicts: Counter[str] = Counter()
    errored = 0
    ungraded = 0
    ungraded_why: Counter[str] = Counter()
    errors: Counter[Any] = Counter()
    tokens_estimated = cost_estimated = False
    costs: list[float] = []
    first: float | None = None
    last: float | None = None

    def attempts() -> Iterator[Mapping[str, Any]]:
        nonlocal errored, ungraded, tokens_estimated, cost_estimated, first, last
        for row in rows:
            verdicts[row.verdict] += 1
            errored += row.errored()
            if row_ungraded(row):
                ungraded += 1
                ungraded_why.update(a.ungraded or "not_graded" for a in row.attempts)
            for a in row.attempts:
                if a.status == "failed":
                    errors[a.error_type] += 1
                tokens_estimated = tokens_estimated or a.tokens_estimated
                cost_estimated = cost_estimated or a.cost_estimated
                if a.cost_usd is not None:
                    costs.append(a.cost_usd)
                if a.started_at:
                    end = a.started_at + a.duration_ms / 1000.0
                    first = a.started_at if first is None else min(first, a.started_at)
                    last = end if last is None else max(last, end)
                # The official metrics read the index keys of each attempt.
                yield {
                    "run_index": a.run_index,
                    "row_index": a.row_index,
                    "status": a.status,
                    "reward": a.reward,
                    "tokens": a.tokens,
                }

    summary = aggregate(attempts(), pass_threshold)
    scored_rows = verdicts["passed"] + verdicts["failed"]
    summary["rows"] = {
        "total": sum(verdicts.values()),
        "passed": verdicts["passed"],
        "failed": verdicts["failed"],
        # The failed rows whose rollouts errored (no reward), not merely scored low.
        "errored": errored,
        "below_threshold": verdicts["failed"] - errored,
        "ungraded": ungraded,
        "skipped": verdicts["skipped"],
        "pass_rate": (verdicts["passed"] / scored_rows) if scored_rows else 0,
        "not_run": len(not_run),
    }
    # The official "failed" counts the attempts that errored; these are the other misses.
    summary["below_threshold"] = max(
        0, summary["total_samples"] - summary["passed"] - summary["skipped"] - summary["failed"]
    )
    summary["ungraded_why"] = [why for why, _ in ungraded_why.most_common()]
    summary["errors_by_type"] = dict(errors.most_common())
    summary["tokens_estimated"] = tokens_estimated
    # None when nothing was priced (a scripted policy and no --osmosis-price-in/-out).
    # sum() of the list, as before: from Python 3.12 it compensates rounding, a loop does not.
    summary["cost_usd"] = round(sum(costs), 10) if costs else None
    summary["cost_estimated"] = cost_estimated
    if first is not None and last is not None:
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
    rows: Sequence[RowRecord],
    *,
    pass_threshold: float,
    selected: Sequence[str],
    finished: Mapping[str, Any] | None,
    config: Mapping[str, Any],
    preflight: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The report document of ``rows`` (in report order: see :func:`in_report_order`), the
    rows of ``selected`` with no record being the rows not run."""
    done = {r.nodeid for r in rows}
    not_run = [nodeid for nodeid in selected if nodeid not in done]
    return report_document(
        rows,
        summarize(rows, pass_threshold, not_run=not_run, finished=finished),
        not_run=not_run,
        config=config,
        preflight=preflight,
    )


def report_document(
    rows: Sequence[RowRecord],
    summary: dict[str, Any],
    *,
    not_run: Sequence[str],
    config: Mapping[str, Any],
    preflight: Sequence[Mapping[str, Any]] = (),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report document: :func:`report_head`, ``extra`` (gates, baseline, resume) at the
    top level, and the rows' two lists, views of the records."""
    document = report_head(summary, not_run=not_run, config=config, preflight=preflight)
    document.update(extra or {})
    document["rows"] = [a for r in rows for a in r.report_rows()]
    document["row_verdicts"] = [r.verdict_entry() for r in rows]
    return document


def in_report_order(rows: Iterable[RowRecord], selected: Sequence[str]) -> list[RowRecord]:
    """``rows`` in ``selected`` order, the rows no one selected after them."""
    position = {nodeid: i for i, nodeid in enumerate(selected)}
    return sorted(rows, key=lambda r: position.get(r.nodeid, len(position)))


def report_head(
    summary: dict[str, Any],
    *,
    not_run: Sequence[str],
    config: Mapping[str, Any],
    preflight: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The report document with its per-row lists (``rows``, ``row_verdicts``) left empty.
    The summary gains the intervals beside its rates, at the run's ``confidence``
    (``--osmosis-confidence``, else 0.95)."""
    confidence = config.get("confidence")
    level = float(confidence) if isinstance(confidence, int | float) else 0.95
    return {
        "schema": REPORT_SCHEMA,
        "summary": {**summary, **summary_intervals(summary, level)},
        "rows": [],
        "row_verdicts": [],
        "not_run": list(not_run),
        "preflight": [dict(p) for p in preflight],
        "config": dict(config),
    }


def rebuild_report(run_dir: Path) -> tuple[dict[str, Any], int]:
    """The report of the run in ``run_dir`` from its ``run.json`` and ``rows.jsonl``.

    Returns the document and the number of unreadable journal lines (a torn last line of a
    killed run). Raises :class:`~osmosis_rollout.runs.journal.RunJournalError` when
    ``run_dir`` is not a run directory.
    """
    run = read_run_file(run_dir)
    rows, bad = read_journal(run_dir / JOURNAL_FILENAME)
    # Rows the run journaled but did not count (pytest had stopped reporting: -x, --maxfail
    # under pytest-xdist) are not counted here either: the rebuilt report is the run's.
    left_out = set((run.get("finished") or {}).get("not_counted") or ())
    rows = [row for row in rows if row.nodeid not in left_out]
    config = run.get("config") or {}
    threshold = config.get("pass_threshold")
    document = build_report(
        in_report_order(rows, run.get("selected") or []),
        pass_threshold=float(threshold) if isinstance(threshold, int | float) else 1.0,
        selected=list(run.get("selected") or []),
        finished=run.get("finished"),
        config=config,
        preflight=(run.get("finished") or {}).get("preflight") or (),
    )
    # Decided again from the rows and how the run ended: a run that died never decided it
    # (and the gates it had are not applied again, so a complete run's verdict is its rows').
    verdict = decide(document["summary"], gates=(), gated=config.get("min_pass_rate") is not None)
    document.update(
        verdict=verdict.model_dump(), run_id=run.get("run_id"), tool_version=tool_version()
    )
    return document, bad


def tool_version() -> str:
    """pytest-osmosis's installed version (what wrote or rebuilt a report)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-osmosis")
    except PackageNotFoundError:
        return "unknown"
