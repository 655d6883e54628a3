"""The run's report and its terminal summary, built from the run's journal.

Each row is journaled once, where its verdict is decided. At the end the controller reads the
journal once, into memory, and builds the report document from it once, as
``osmosis-rollout report rebuild`` does (:func:`osmosis_rollout.runs.report.build_report`):
the gates, the baseline comparison, ``report.json``, the HTML and the markdown read it.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from osmosis_rollout._internal.atomic import copy_atomic, write_json_atomic
from osmosis_rollout.redaction import Redactor
from osmosis_rollout.runs.journal import JOURNAL_FILENAME, RowJournal, read_journal
from osmosis_rollout.runs.report import build_report, in_report_order
from osmosis_rollout.runs.report_model import RowRecord
from osmosis_rollout.runs.report_text import format_cost, interval_text, ungraded_line
from osmosis_rollout.runs.run_verdict import failed_parts

__all__ = ["RunReport", "reward_word"]


class RunReport:
    """The run's rows: journaled where they are decided, read back once at the end.
    ``resume=True`` appends to the journal (``--osmosis-resume``) instead of starting afresh."""

    def __init__(
        self,
        output: Path,
        *,
        pass_threshold: float,
        settings: dict[str, Any],
        redactor: Redactor | None = None,
        resume: bool = False,
        run_id: str | None = None,
    ) -> None:
        self.output = output
        self.pass_threshold = pass_threshold
        self.settings = settings
        # Not `redactor or ...`: one with no secret yet is falsy, and is still the one
        # the policy endpoint's key joins when the engine starts.
        self.redactor = redactor if redactor is not None else Redactor()
        self.journal = RowJournal(
            output / JOURNAL_FILENAME, fresh=not resume, redactor=self.redactor, run_id=run_id
        )
        self.reported: set[str] = set()
        """The node ids of the rows pytest reported (on the controlling process)."""
        self.rows: list[RowRecord] = []
        """After :meth:`finish`: every row of the report, in report order."""
        self.preflight: list[dict[str, Any]] = []
        self.finished: dict[str, Any] = {"stopped_by": None, "interrupted": False}
        self._selected: list[str] = []
        self._document: dict[str, Any] | None = None
        self._written: Path | None = None

    def close(self) -> None:
        """Stop journaling (late rollouts of a stopped run are not written)."""
        self.journal.close()

    def finish(
        self, *, selected: list[str], finished: dict[str, Any], counted: set[str] | None = None
    ) -> None:
        """Read the journal once: its rows (every row that finished, reported or not; with
        ``counted``, only those) in ``selected`` order, and how the run ended (with the
        journaled rows left out: ``finished["not_counted"]``, which ``run.json`` keeps so
        that ``osmosis-rollout report rebuild`` leaves them out too)."""
        rows, _ = read_journal(self.output / JOURNAL_FILENAME, self.redactor)
        self.finished = dict(finished)
        if counted is not None:
            if left_out := [row.nodeid for row in rows if row.nodeid not in counted]:
                self.finished["not_counted"] = left_out
            rows = [row for row in rows if row.nodeid in counted]
        self.rows = in_report_order(rows, selected)
        self._selected = selected

    def document(self) -> dict[str, Any]:
        """The JSON report of the rows :meth:`finish` read, redacted: :meth:`write_json`
        writes this very dict, with what the run's end adds to its top level."""
        document = build_report(
            self.rows,
            pass_threshold=self.pass_threshold,
            selected=self._selected,
            finished=self.finished,
            config=self.settings,
            preflight=self.preflight,
        )
        # The rows were redacted as they were read (finish); the rest is redacted here.
        for key, value in document.items():
            if key not in ("rows", "row_verdicts"):
                document[key] = self.redactor.redact_shared(value)
        self._document, self._written = document, None
        return document

    def write_json(self, path: Path) -> None:
        """Write :meth:`document`'s report to ``path``, atomically: encoded once, copied to
        the other paths."""
        if self._written is not None and self._written.is_file():
            copy_atomic(self._written, path)
            return
        write_json_atomic(path, self._document)
        self._written = path


def _fmt(value: float | None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.3f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.1f}"


def reward_word(record: dict[str, Any], threshold: float) -> str:
    """What ``-v`` shows beside a row's outcome: ``reward=1.0``, ``reward=0.0 < 1.0``,
    ``error=timeout``; over several attempts, how many passed and each one's reward."""
    attempts = record.get("attempts") or []
    if len(attempts) == 1:
        only = attempts[0]
        if only.get("status") == "failed":
            return f"error={only.get('error_type')}"
        reward = only.get("reward")
        if reward is None:
            return "no reward"
        below = f" < {_fmt(threshold)}" if not only.get("passed") else ""
        return f"reward={_fmt(reward)}{below}{_why(only) if below else ''}"
    rewards = ",".join("-" if a.get("reward") is None else _fmt(a["reward"]) for a in attempts)
    passed = sum(1 for a in attempts if a.get("passed"))
    return f"{passed}/{len(attempts)} reached {_fmt(threshold)} rewards={rewards}"


WHY_CHARS = 80
"""Characters of the grader's first line ``-v`` shows beside a missed reward."""


def _why(attempt: dict[str, Any]) -> str:
    """`` (expected 4, got 3)``: the first line the grader said, without its logger prefix."""
    reason = str((attempt.get("grader") or {}).get("reason") or "").strip()
    if not reason:
        return ""
    first = reason.splitlines()[0]
    # "WARNING graders.x: expected 4, got 3" -> "expected 4, got 3"
    level, _, rest = first.partition(" ")
    if level.isupper() and ": " in rest:
        first = rest.split(": ", 1)[1]
    if len(first) > WHY_CHARS:
        first = first[: WHY_CHARS - 3] + "..."
    return f" ({first})"


Segment = tuple[str, dict[str, bool]]
"""A piece of a summary line and its pytest markup (``{"red": True}``, ...)."""


def _counts(counts: dict[str, Any]) -> list[Segment]:
    """``N  passed: P  failed: F (E errored, B below threshold)  skipped: S  pass rate: R
    [L, H] (C)`` for a summary's counts, coloured as pytest does."""
    passed, failed, skipped = counts["passed"], counts["failed"], counts["skipped"]
    segments: list[Segment] = [
        (f"{counts['total']}  ", {}),
        (f"passed: {passed}", {"green": True} if passed else {}),
        ("  ", {}),
        (f"failed: {failed}", {"red": True} if failed else {}),
    ]
    if failed:
        segments.append((f" ({failed_parts(failed, counts.get('errored', 0))})", {"red": True}))
    segments.append((f"  skipped: {skipped}", {"yellow": True} if skipped else {}))
    rate = f"{counts['pass_rate']:.1%}{interval_text(counts.get('pass_rate_interval'))}"
    segments.append((f"  pass rate: {rate}", {}))
    return segments


def summary_segments(
    report: RunReport, summary: dict[str, Any], *, slowest: int = 5, entrypoint: str | None = None
) -> list[list[Segment]]:
    """The human summary printed at the end of the session, as lines of marked-up pieces.
    ``passed + failed + skipped`` is the total, for rows and for attempts; ``failed`` splits
    into ``errored`` and ``below threshold``, as in the HTML and ``report.json``'s schema."""
    rows = summary["rows"]
    threshold = f"  (threshold: reward >= {_fmt(report.pass_threshold)})"
    segments: list[list[Segment]] = [[("rows: ", {}), *_counts(rows), (threshold, {})]]
    if (total := summary["total_samples"]) != rows["total"]:
        # The official "failed" counts attempts that errored; below-threshold ones are the rest.
        failed = total - summary["passed"] - summary["skipped"]
        attempts = {**summary, "total": total, "failed": failed, "errored": summary["failed"]}
        segments.append([("attempts: ", {}), *_counts(attempts)])
    if ungraded := ungraded_line(summary, entrypoint):
        segments.append([(ungraded, {"yellow": True})])
    segments.extend(
        [(line, {"red": True} if line.startswith("errors: ") else {})]
        for line in _detail_lines(report, summary, slowest)
    )
    return segments


def _detail_lines(report: RunReport, summary: dict[str, Any], slowest: int) -> list[str]:
    lines: list[str] = []
    if stats := summary.get("reward_stats"):
        left = stats.get("errored_left_out")
        lines.append(
            "reward: mean {mean}{interval}  median {median}  std {std}  min {min}  max {max}".format(
                interval=interval_text(stats.get("mean_interval"), "{:.3g}")
                + (f" ({left} errored attempts left out)" if left else ""),
                **{k: _fmt(stats.get(k)) for k in ("mean", "median", "std", "min", "max")},
            )
        )
    if summary.get("pass_at_k"):
        pak = "  ".join(f"pass@{k}={v:.3f}" for k, v in summary["pass_at_k"].items())
        phk = "  ".join(f"pass^{k}={v:.3f}" for k, v in (summary.get("pass_hat_k") or {}).items())
        lines.append(f"{pak}   {phk}".rstrip())
    if errors := summary["errors_by_type"]:
        lines.append("errors: " + ", ".join(f"{k} x{v}" for k, v in errors.items()))
    if tokens := summary.get("tokens_used"):
        estimated = " (estimated)" if summary.get("tokens_estimated") else ""
        lines.append(f"tokens: {tokens}{estimated}")
    if (cost := summary.get("cost_usd")) is not None:
        rows_total, attempts_total = summary["rows"]["total"], summary["total_samples"]
        per = f"  per row {format_cost(cost / rows_total)}" if rows_total else ""
        if attempts_total != rows_total and attempts_total:
            per += f"  per attempt {format_cost(cost / attempts_total)}"
        estimated = " (estimated)" if summary.get("cost_estimated") else ""
        lines.append(f"cost: {format_cost(cost)}{per}{estimated}")
    attempts = [a for row in report.rows for a in row.attempts]
    if attempts:
        durations = [a.duration_ms for a in attempts]
        wall = summary.get("rollouts_wall_s")
        lines.append(
            f"rollout time: sum {sum(durations) / 1000:.2f}s  "
            f"median {statistics.median(durations) / 1000:.3f}s"
            + (f"  wall {wall:.2f}s" if wall is not None else "")
        )
    if len(attempts) > 1:
        # The longest first; of equal durations the earlier ranks higher (sorted is stable).
        longest = sorted(attempts, key=lambda a: -a.duration_ms)[:slowest]
        lines.append(
            "slowest: "
            + ", ".join(
                f"{a.row_key}{f'#{a.run_index}' if a.run_index else ''} {a.duration_ms / 1000:.2f}s"
                for a in longest
            )
        )
    flaky = [
        f"{row.row_key} {row.stats['passed_attempts']}/{row.stats['attempts']}"
        for row in report.rows
        if row.stats.get("flaky")
    ]
    if flaky:
        lines.append("flaky rows (mixed results): " + ", ".join(flaky))
    return lines
