"""The run's files and its terminal summary, written once, on the controlling process.

A row's record travels on its call report as an ``osmosis`` attribute of JSON primitives
(set by the session's makereport wrapper), so the same code works in-process and under
pytest-xdist, where items run on workers and reports come back to the controller; flat
``user_properties`` carry only the headline numbers, for JUnit XML. Each row is appended to
``rows.jsonl`` when its report arrives; the JSON report and the summary are built at the end
from small per-attempt records (no messages).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO


@dataclass
class RowRecord:
    """What the controller keeps per row: its verdict and its attempts' index rows."""

    nodeid: str
    dataset: str
    row_key: str
    verdict: str
    attempts: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)


class RunReport:
    """Collects row records, streams them to disk, and renders the summary and report."""

    def __init__(self, output: Path, *, pass_threshold: float, settings: dict[str, Any]) -> None:
        self.output = output
        self.pass_threshold = pass_threshold
        self.settings = settings
        self.rows: list[RowRecord] = []
        self._stream: TextIO | None = None
        self.preflight: list[dict[str, Any]] = []

    def add(self, record: RowRecord) -> None:
        """Keep one row's record and append its attempts to ``rows.jsonl`` at once."""
        self.rows.append(record)
        if self._stream is None:
            self.output.mkdir(parents=True, exist_ok=True)
            # A fresh file per run, even when --osmosis-output is reused.
            self._stream = (self.output / "rows.jsonl").open("w", encoding="utf-8")
        for attempt in record.attempts:
            self._stream.write(json.dumps(attempt, sort_keys=True) + "\n")

    def close(self) -> None:
        """Close the row stream."""
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    @property
    def attempts(self) -> list[dict[str, Any]]:
        """Every attempt's index row, in item order."""
        return [a for r in self.rows for a in r.attempts]

    def summary(self) -> dict[str, Any]:
        """The official ``metrics.json`` summary keys, plus row-level counts of ours."""
        from osmosis_rollout.metrics import aggregate

        summary = aggregate(self.attempts, self.pass_threshold)
        verdicts = Counter(r.verdict for r in self.rows)
        scored_rows = verdicts["passed"] + verdicts["failed"]
        summary["rows"] = {
            "total": len(self.rows),
            "passed": verdicts["passed"],
            "failed": verdicts["failed"],
            # The failed rows whose rollouts errored (no reward), not merely scored low.
            "errored": sum(1 for r in self.rows if row_errored(r.verdict, r.attempts)),
            "skipped": verdicts["skipped"],
            "pass_rate": (verdicts["passed"] / scored_rows) if scored_rows else 0,
        }
        errors = Counter(a["error_type"] for a in self.attempts if a.get("status") == "failed")
        summary["errors_by_type"] = dict(errors.most_common())
        summary["tokens_estimated"] = any(a.get("tokens_estimated") for a in self.attempts)
        costs = [a["cost_usd"] for a in self.attempts if a.get("cost_usd") is not None]
        # None when nothing was priced (a scripted policy and no --osmosis-price-in/-out).
        summary["cost_usd"] = round(sum(costs), 10) if costs else None
        summary["cost_estimated"] = any(a.get("cost_estimated") for a in self.attempts)
        timed = [a for a in self.attempts if a.get("started_at")]
        if timed:
            first = min(a["started_at"] for a in timed)
            last = max(a["started_at"] + a["duration_ms"] / 1000.0 for a in timed)
            # Wall time from the first rollout's start to the last one's end: what concurrency buys.
            summary["rollouts_wall_s"] = round(last - first, 3)
        return summary

    def write(self, extra: dict[str, Any], paths: list[Path]) -> dict[str, Any]:
        """Write the JSON report to every path in ``paths``; return the document."""
        document = {
            "schema": "pytest-osmosis/report/v1",
            "summary": self.summary(),
            "rows": self.attempts,
            "row_verdicts": [
                {
                    "nodeid": r.nodeid,
                    "dataset": r.dataset,
                    "row_key": r.row_key,
                    "verdict": r.verdict,
                    **r.stats,
                }
                for r in self.rows
            ],
            "preflight": self.preflight,
            "config": self.settings,
            **extra,
        }
        from osmosis_rollout._atomic import copy_atomic, write_json_atomic

        first, *others = paths
        write_json_atomic(first, document)
        for path in others:
            copy_atomic(first, path)
        return document


def format_cost(cost: float) -> str:
    """US dollars with enough digits to see small amounts: ``$0.0042``, ``$1.23``."""
    if cost >= 1:
        return f"${cost:,.2f}"
    if cost >= 0.01:
        return f"${cost:.3f}"
    return f"${cost:.4f}"


def _fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.1f}"


def reward_word(record: dict[str, Any], threshold: float) -> str:
    """What ``-v`` shows beside a row's outcome: ``reward=1.0``, ``reward=0.0 < 1.0``, ``error=timeout``.

    Over several attempts: the passing count and each attempt's reward (``-`` when it errored).
    """
    attempts = record.get("attempts") or []
    if len(attempts) == 1:
        only = attempts[0]
        if only.get("status") == "failed":
            return f"error={only.get('error_type')}"
        reward = only.get("reward")
        if reward is None:
            return "no reward"
        below = f" < {_fmt(threshold)}" if not only.get("passed") else ""
        return f"reward={_fmt(reward)}{below}"
    rewards = ",".join("-" if a.get("reward") is None else _fmt(a["reward"]) for a in attempts)
    passed = sum(1 for a in attempts if a.get("passed"))
    return f"{passed}/{len(attempts)} reached {_fmt(threshold)} rewards={rewards}"


def _attempt_label(attempt: dict[str, Any]) -> str:
    run = attempt.get("run_index") or 0
    return f"{attempt['row_key']}#{run}" if run else str(attempt["row_key"])


def row_errored(verdict: str, attempts: list[dict[str, Any]]) -> bool:
    """A failed row whose rollouts errored (at least one attempt has no reward because it failed)."""
    return verdict == "failed" and any(a.get("status") == "failed" for a in attempts)


Segment = tuple[str, dict[str, bool]]
"""A piece of a summary line and its pytest markup (``{"red": True}``, ...)."""


def _counts(
    total: int, passed: int, failed: int, errored: int, skipped: int, rate: float
) -> list[Segment]:
    """``N  passed: P  failed: F (E errored)  skipped: S  pass rate: R``, coloured as pytest does."""
    segments: list[Segment] = [
        (f"{total}  ", {}),
        (f"passed: {passed}", {"green": True} if passed else {}),
        ("  ", {}),
        (f"failed: {failed}", {"red": True} if failed else {}),
    ]
    if errored:
        segments.append((f" ({errored} errored)", {"red": True}))
    segments.append((f"  skipped: {skipped}", {"yellow": True} if skipped else {}))
    segments.append((f"  pass rate: {rate:.1%}", {}))
    return segments


def summary_segments(
    report: RunReport, summary: dict[str, Any], *, slowest: int = 5
) -> list[list[Segment]]:
    """The human summary printed at the end of the session, as lines of marked-up pieces.

    Counts add up: ``passed + failed + skipped`` is the total, for rows and for attempts;
    ``errored`` is the part of ``failed`` whose rollouts errored rather than scored low.
    """
    rows = summary["rows"]
    segments: list[list[Segment]] = [
        [
            ("rows: ", {}),
            *_counts(
                rows["total"],
                rows["passed"],
                rows["failed"],
                rows.get("errored", 0),
                rows["skipped"],
                rows["pass_rate"],
            ),
            (f"  (threshold: reward >= {_fmt(report.pass_threshold)})", {}),
        ]
    ]
    if summary["total_samples"] != rows["total"]:
        total, skipped = summary["total_samples"], summary["skipped"]
        # The official "failed" counts attempts that errored; below-threshold ones are the rest.
        errored, passed = summary["failed"], summary["passed"]
        segments.append(
            [
                ("attempts: ", {}),
                *_counts(
                    total,
                    passed,
                    total - passed - skipped,
                    errored,
                    skipped,
                    float(summary["pass_rate"]),
                ),
            ]
        )
    segments.extend(
        [(line, {"red": True} if line.startswith("errors: ") else {})]
        for line in _detail_lines(report, summary, slowest)
    )
    return segments


def summary_lines(report: RunReport, summary: dict[str, Any], *, slowest: int = 5) -> list[str]:
    """The human summary printed at the end of the session, as plain text."""
    return [
        "".join(text for text, _ in line)
        for line in summary_segments(report, summary, slowest=slowest)
    ]


def _detail_lines(report: RunReport, summary: dict[str, Any], slowest: int) -> list[str]:
    lines: list[str] = []
    stats = summary.get("reward_stats")
    if stats:
        lines.append(
            "reward: mean {mean}  median {median}  std {std}  min {min}  max {max}".format(
                **{k: _fmt(stats.get(k)) for k in ("mean", "median", "std", "min", "max")}
            )
        )
    if summary.get("pass_at_k"):
        pak = "  ".join(f"pass@{k}={v:.3f}" for k, v in summary["pass_at_k"].items())
        phk = "  ".join(f"pass^{k}={v:.3f}" for k, v in (summary.get("pass_hat_k") or {}).items())
        lines.append(f"{pak}   {phk}".rstrip())
    if summary["errors_by_type"]:
        lines.append(
            "errors: " + ", ".join(f"{k} x{v}" for k, v in summary["errors_by_type"].items())
        )
    tokens = summary.get("tokens_used")
    if tokens:
        lines.append(
            f"tokens: {tokens}" + (" (estimated)" if summary.get("tokens_estimated") else "")
        )
    cost = summary.get("cost_usd")
    if cost is not None:
        rows_total, attempts_total = summary["rows"]["total"], summary["total_samples"]
        per = f"  per row {format_cost(cost / rows_total)}" if rows_total else ""
        if attempts_total != rows_total and attempts_total:
            per += f"  per attempt {format_cost(cost / attempts_total)}"
        lines.append(
            f"cost: {format_cost(cost)}{per}"
            + (" (estimated)" if summary.get("cost_estimated") else "")
        )
    attempts = report.attempts
    if attempts:
        durations = [a["duration_ms"] for a in attempts]
        wall = summary.get("rollouts_wall_s")
        lines.append(
            f"rollout time: sum {sum(durations) / 1000:.2f}s  median {statistics.median(durations) / 1000:.3f}s"
            + (f"  wall {wall:.2f}s" if wall is not None else "")
        )
        top = sorted(attempts, key=lambda a: a["duration_ms"], reverse=True)[:slowest]
        if len(attempts) > 1:
            lines.append(
                "slowest: "
                + ", ".join(f"{_attempt_label(a)} {a['duration_ms'] / 1000:.2f}s" for a in top)
            )
    flaky = [r for r in report.rows if r.stats.get("flaky")]
    if flaky:
        lines.append(
            "flaky rows (mixed results): "
            + ", ".join(
                f"{r.row_key} {r.stats['passed_attempts']}/{r.stats['attempts']}" for r in flaky
            )
        )
    return lines
