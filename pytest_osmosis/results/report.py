"""The run's report and its terminal summary, built from the run's journal.

Rows are journaled where they run (:mod:`osmosis_rollout.runs.journal`): appended to
``rows.jsonl`` as soon as a row's rollouts finish, and again if pytest's report changes the
row (a user hook's verdict, an item deadline). A row's record also travels on its call
report as an ``osmosis`` attribute of JSON primitives, so under pytest-xdist the controller
sees every row it reported even if a worker's journal write failed; flat
``user_properties`` carry only the headline numbers, for JUnit XML.

At the end the controller reads the journal back (rows that finished but were never
reported, e.g. after ``-x``, count too), overlays the rows it saw reported, and builds the
JSON report as :func:`osmosis_rollout.runs.report.build_report` does, the function
``osmosis-rollout report rebuild`` uses on a run that died. While pytest runs, the report
keeps in memory only the reported rows this process did not journal itself (pytest-xdist
workers' rows); at the end it keeps only where each row's lines are in the journal, and reads
the rows back once, one at a time: the summary, the terminal's timings and the report's two
row lists (formatted into temporary files that every report file copies) come from that one
reading.
"""

from __future__ import annotations

import copy
import functools
import heapq
import math
import operator
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from osmosis_rollout._internal.atomic import JsonListSpool, write_json_streamed
from osmosis_rollout.redaction import Redactor
from osmosis_rollout.runs.gating import percent
from osmosis_rollout.runs.journal import (
    JOURNAL_FILENAME,
    JournalRow,
    RowJournal,
    index_journal,
    parse_journal_row,
    read_journal_lines,
)
from osmosis_rollout.runs.report import report_head, row_errored, row_verdict_entry, summarize
from osmosis_rollout.runs.run_verdict import failed_parts
from pytest_osmosis.results.verdict import RowVerdict

RowRecord = JournalRow
"""What the controller keeps per row: its verdict, its attempts' index rows, its statistics."""

__all__ = [
    "RowRecord",
    "RunReport",
    "Timings",
    "format_cost",
    "reward_word",
    "row_errored",
    "row_record",
]

FINISHED_NORMALLY: dict[str, Any] = {"stopped_by": None, "interrupted": False}

SUMMARY_KEYS = frozenset(
    {
        "reward",
        "status",
        "error_type",
        "tokens",
        "tokens_estimated",
        "cost_usd",
        "cost_estimated",
        "started_at",
        "duration_ms",
        "run_index",
        "row_index",
        "row_key",
    }
)
"""The attempt keys the summary, the gates and the terminal read from each row as it is read
back (the report files read every attempt whole)."""


def row_record(nodeid: str, dataset: str, row_key: str, verdict: RowVerdict) -> RowRecord:
    """The record of a finished row, as the journal, the report and its call report carry it."""
    return RowRecord(
        nodeid=nodeid,
        dataset=dataset,
        row_key=row_key,
        verdict=verdict.outcome,
        attempts=[a.index_row(nodeid, dataset) for a in verdict.attempts],
        stats=verdict.stats(),
    )


class RunReport:
    """The run's rows: journaled where they run, collected from reports, read back at the end.

    ``resume=True`` appends to an existing journal (``--osmosis-resume``) instead of starting
    a fresh one. Nothing is created on disk until the first row is journaled.
    """

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
        self.rows: list[RowRecord] = []
        """The reported rows the journal may not hold as reported (pytest-xdist workers')."""
        self._in_journal: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        """Reported rows whose reported version this process journaled: their key orders."""
        self._orders: dict[tuple[tuple[str, ...], tuple[str, ...]], Any] = {}
        """Each distinct key order once (rows share them)."""
        self._where: dict[str, list[int]] = {}
        """After :meth:`finish`: the journal offsets of each row read from it."""
        self._held: dict[str, RowRecord] = {}
        """After :meth:`finish`: the rows of the report that are not read from the journal."""
        self._order: list[str] | None = None
        """After :meth:`finish`: every row's node id, in report order."""
        self._read: _ReadBack | None = None
        """After :meth:`finish`, once asked for: the rows as read back (see :meth:`summary`)."""
        self.preflight: list[dict[str, Any]] = []
        self.selected: list[str] = []
        self.not_run: list[str] = []
        self.finished: dict[str, Any] = dict(FINISHED_NORMALLY)

    def journal_row(self, record: RowRecord) -> None:
        """Append ``record`` to ``rows.jsonl`` now (where the row ran)."""
        self.journal.write_encoded(self.encode_row(record))

    def encode_row(self, record: RowRecord) -> bytes:
        """The journal lines of ``record``, as :meth:`journal_row` would append them."""
        return self.journal.encode_row(
            record.attempts,
            verdict=record.verdict,
            stats=record.stats,
            fingerprint=record.fingerprint,
        )

    def add(self, record: RowRecord, *, journaled: bool = False) -> None:
        """Keep one reported row's record (on the controlling process).

        ``journaled``: this process wrote exactly this record to the journal, where
        :meth:`finish` reads it back; only the order of its keys is kept, not the record.
        """
        if not journaled:
            self.rows.append(record)
            return
        attempt_keys = tuple(record.attempts[0]) if record.attempts else ()
        order = (attempt_keys, tuple(record.stats))
        self._in_journal[record.nodeid] = self._orders.setdefault(order, order)

    @property
    def reported(self) -> int:
        """How many reported rows were added (before :meth:`finish`)."""
        return len(self.rows) + len(self._in_journal)

    def reported_ids(self) -> set[str]:
        """The node ids of the reported rows (before :meth:`finish`)."""
        return {record.nodeid for record in self.rows} | set(self._in_journal)

    def close(self) -> None:
        """Stop journaling (late rollouts of a stopped run are not written); remove the
        temporary files of the rows read back."""
        self.journal.close()
        self.release_files()

    def release_files(self) -> None:
        """Remove the temporary files that hold the report's row lists, once every report
        file is written (:meth:`write_json` fails after it); the summary and the timings
        stay."""
        if self._read is not None:
            self._read.close()

    def finish(
        self,
        *,
        selected: list[str],
        finished: dict[str, Any],
        counted: set[str] | None = None,
    ) -> None:
        """Index the journal's rows and say how the run ended.

        Rows are the journal's (every row that finished, reported or not), each replaced by
        the record its report carried when there is one, in ``selected`` order; the rows of
        ``selected`` with neither are the rows not run. Only where each row's lines are is
        kept: the first of :meth:`summary`, :meth:`write_json` and :meth:`timings` reads the
        rows back, one at a time, for all three, so the end of a 10,000-row run neither holds
        them all nor reads them more than once. With ``counted``, only those journaled rows
        count; the others of ``selected`` are rows not run.
        """
        where, _ = index_journal(self.output / JOURNAL_FILENAME)
        if counted is not None:
            where = {nodeid: offsets for nodeid, offsets in where.items() if nodeid in counted}
        held = {record.nodeid: record for record in self.rows}
        done = [*where, *(nodeid for nodeid in held if nodeid not in where)]
        for nodeid in held:
            where.pop(nodeid, None)
        self._where = where
        self._held = held
        position = {nodeid: i for i, nodeid in enumerate(selected)}
        self._order = sorted(done, key=lambda nodeid: position.get(nodeid, len(position)))
        finished_ids = set(done)
        self.selected = list(selected)
        self.not_run = [nodeid for nodeid in selected if nodeid not in finished_ids]
        self.finished = dict(finished)
        self.release_files()
        self._read = None

    def iter_rows(self, keep: frozenset[str] | None = SUMMARY_KEYS) -> Iterator[RowRecord]:
        """Every row in report order (after :meth:`finish`; the held rows before it), those
        of the journal read back one at a time with only the attempt keys in ``keep`` (all
        when None)."""
        for row, _ in self._rows(keep, check=False):
            yield row

    def _rows(
        self, keep: frozenset[str] | None, *, check: bool
    ) -> Iterator[tuple[RowRecord, bool]]:
        """:meth:`iter_rows`, each row with whether redacting it would certainly change
        nothing (``check``: its journal lines hold no secret of the redactor)."""
        if self._order is None:
            for row in self.rows:
                yield row, False
            return
        if not self._where:
            for nodeid in self._order:
                yield self._held[nodeid], False
            return
        with (self.output / JOURNAL_FILENAME).open("rb") as handle:
            for nodeid in self._order:
                offsets = self._where.get(nodeid)
                if offsets is None:
                    yield self._held[nodeid], False
                    continue
                lines = read_journal_lines(handle, offsets)
                last = offsets.index(max(offsets))
                row = parse_journal_row(lines, last=last, keep=keep, share=False)
                yield row, check and all(self._holds_no_secret(line) for line in lines)

    def _holds_no_secret(self, line: bytes) -> bool:
        # An ASCII line decodes the same whichever encoding json.loads detected in it.
        return line.isascii() and self.redactor.absent_from_json(line.decode("ascii"))

    def summary(self) -> dict[str, Any]:
        """The official ``metrics.json`` summary keys, plus row-level counts and completeness."""
        if self._order is None:
            return summarize(
                self.iter_rows(), self.pass_threshold, not_run=self.not_run, finished=self.finished
            )
        return copy.deepcopy(self._read_back().summary)

    def head(self, extra: dict[str, Any]) -> dict[str, Any]:
        """The JSON report (redacted) without its per-row lists, with ``extra`` (gates,
        baseline) at the top level (see :meth:`write_json`)."""
        document = report_head(
            self.summary(), not_run=self.not_run, config=self.settings, preflight=self.preflight
        )
        document.update(extra)
        redacted: dict[str, Any] = self.redactor.redact_shared(document)
        return redacted

    def write_json(self, path: Path, head: dict[str, Any]) -> None:
        """Write the JSON report to ``path``: the bytes of ``write_json_atomic`` of the whole
        document, its rows read back from the journal one by one (once for every file, see
        :meth:`finish`), never all held at once."""
        if self._order is not None:
            self._read_back().write_json(path, head)
            return
        read = self._read_rows()
        try:
            read.write_json(path, head)
        finally:
            read.close()

    def timings(self, slowest: int) -> Timings:
        """The rollouts' durations, the ``slowest`` longest and the flaky rows, for the
        terminal summary."""
        if self._order is not None and self._read_back().timings.top >= slowest:
            return self._read_back().timings.first(slowest)
        tally = _TimingsTally(slowest)
        for row in self.iter_rows():
            tally.add(row)
        return tally.result()

    def row_groups(self) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
        """Each row's ``row_verdicts`` entry and its attempts, whole and redacted, in report
        order, as the report files hold them (for a writer that renders a row at a time)."""
        for row, clean in self._rows(None, check=True):
            yield self._as_reported(row, redacted=clean)

    def _read_back(self) -> _ReadBack:
        """Every row read back from the journal once (after :meth:`finish`): the summary,
        the timings and the report's two row lists, formatted into temporary files."""
        if self._read is None:
            self._read = self._read_rows()
        return self._read

    def _read_rows(self) -> _ReadBack:
        # Beside the report files, on their disk: the system's temporary directory may be
        # a small in-memory file system.
        directory = self.output if self.output.is_dir() else None
        rows, verdicts = JsonListSpool(directory), JsonListSpool(directory)
        tally = _TimingsTally(SLOWEST)

        def read() -> Iterator[RowRecord]:
            for row, clean in self._rows(None, check=True):
                verdict, attempts = self._as_reported(row, redacted=clean)
                verdicts.append(verdict)
                for attempt in attempts:
                    rows.append(attempt)
                tally.add(row)
                yield row

        try:
            summary = summarize(
                read(), self.pass_threshold, not_run=self.not_run, finished=self.finished
            )
        except BaseException:
            rows.close()
            verdicts.close()
            raise
        return _ReadBack(summary, tally.result(), rows, verdicts)

    def _as_reported(
        self, row: RowRecord, *, redacted: bool = False
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """``row`` redacted (unless it is known to hold no secret: ``redacted``), in the key
        order its report carried (the journal sorts keys)."""
        redact = _as_it_is if redacted else self.redactor.redact_shared
        order = self._in_journal.get(row.nodeid) if row.nodeid in self._where else None
        if order is None:
            return redact(row_verdict_entry(row)), [redact(a) for a in row.attempts]
        attempts = [redact(_in_order(a, order[0])) for a in row.attempts]
        stats = _in_order(row.stats, order[1])
        # Not dataclasses.replace, which costs several times more per row.
        ordered = RowRecord(row.nodeid, row.dataset, row.row_key, row.verdict, row.attempts, stats)
        return redact(row_verdict_entry(ordered)), attempts


@dataclass
class _ReadBack:
    """What one reading of the rows gave: the summary, the timings, the report's row lists."""

    summary: dict[str, Any]
    timings: Timings
    rows: JsonListSpool
    verdicts: JsonListSpool

    def write_json(self, path: Path, head: dict[str, Any]) -> None:
        write_json_streamed(path, head, {"rows": self.rows, "row_verdicts": self.verdicts})

    def close(self) -> None:
        self.rows.close()
        self.verdicts.close()


SLOWEST = 5
"""How many of the slowest rollouts the terminal summary names."""


@dataclass(frozen=True)
class Timings:
    """The rollouts' durations (ms) as the terminal summary shows them."""

    count: int
    total_ms: float
    median_ms: float | None
    slowest: list[tuple[float, str]]
    """Up to ``top`` (duration, label), longest first, equal ones in row order."""
    top: int
    flaky: list[str]
    """``row_key passed/attempts`` of each row with mixed results."""

    def first(self, slowest: int) -> Timings:
        """These timings naming only the ``slowest`` longest rollouts."""
        return replace(self, slowest=self.slowest[:slowest], top=slowest)


class _TimingsTally:
    """Builds :class:`Timings` from rows read one at a time (only the durations are kept)."""

    def __init__(self, top: int) -> None:
        self.top = top
        self.durations: list[float] = []
        self.heap: list[tuple[float, int, str]] = []
        self.flaky: list[str] = []

    def add(self, row: RowRecord) -> None:
        if row.stats.get("flaky"):
            self.flaky.append(
                f"{row.row_key} {row.stats['passed_attempts']}/{row.stats['attempts']}"
            )
        for attempt in row.attempts:
            ms = attempt["duration_ms"]
            self.durations.append(ms)
            # Of equal durations the earlier ranks higher: -position orders them so.
            entry = (ms, -len(self.durations))
            if len(self.heap) < self.top:
                heapq.heappush(self.heap, (*entry, _attempt_label(attempt)))
            elif self.heap and entry > self.heap[0][:2]:
                heapq.heapreplace(self.heap, (*entry, _attempt_label(attempt)))

    def result(self) -> Timings:
        durations = self.durations
        return Timings(
            count=len(durations),
            total_ms=sum(durations),
            median_ms=statistics.median(durations) if durations else None,
            slowest=[(ms, label) for ms, _, label in sorted(self.heap, reverse=True)],
            top=self.top,
            flaky=self.flaky,
        )


@functools.lru_cache(maxsize=64)
def _getter(keys: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    return operator.itemgetter(*keys)


def _as_it_is(value: Any) -> Any:
    return value


def _in_order(values: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """``values`` with ``keys`` first, in that order (then any others, as they were)."""
    if len(values) == len(keys) > 1:
        try:
            # The same keys (the usual case): taken in one call, not one lookup at a time.
            return dict(zip(keys, _getter(keys)(values), strict=True))
        except KeyError:
            pass
    ordered = {k: values[k] for k in keys if k in values}
    ordered.update((k, v) for k, v in values.items() if k not in ordered)
    return ordered


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
        return f"reward={_fmt(reward)}{below}{_why(only) if below else ''}"
    rewards = ",".join("-" if a.get("reward") is None else _fmt(a["reward"]) for a in attempts)
    passed = sum(1 for a in attempts if a.get("passed"))
    return f"{passed}/{len(attempts)} reached {_fmt(threshold)} rewards={rewards}"


WHY_CHARS = 80
"""Characters of the grader's first line ``-v`` shows beside a missed reward."""


def _why(attempt: dict[str, Any]) -> str:
    """`` (expected 4, got 3)``: the first line the grader said, without its logger prefix."""
    said = attempt.get("grader") or {}
    reason = said.get("reason") if isinstance(said, dict) else None
    if not reason:
        return ""
    first = str(reason).strip().splitlines()[0]
    # "WARNING graders.x: expected 4, got 3" -> "expected 4, got 3"
    level, _, rest = first.partition(" ")
    if level.isupper() and ": " in rest:
        first = rest.split(": ", 1)[1]
    if len(first) > WHY_CHARS:
        first = first[: WHY_CHARS - 3] + "..."
    return f" ({first})"


def _attempt_label(attempt: dict[str, Any]) -> str:
    run = attempt.get("run_index") or 0
    return f"{attempt['row_key']}#{run}" if run else str(attempt["row_key"])


Segment = tuple[str, dict[str, bool]]
"""A piece of a summary line and its pytest markup (``{"red": True}``, ...)."""


def _counts(
    total: int,
    passed: int,
    failed: int,
    errored: int,
    skipped: int,
    rate: float,
    interval: Any = None,
) -> list[Segment]:
    """``N  passed: P  failed: F (E errored, B below threshold)  skipped: S  pass rate: R
    [L, H] (C)``, coloured as pytest does (the interval when the summary has one)."""
    segments: list[Segment] = [
        (f"{total}  ", {}),
        (f"passed: {passed}", {"green": True} if passed else {}),
        ("  ", {}),
        (f"failed: {failed}", {"red": True} if failed else {}),
    ]
    if failed:
        segments.append((f" ({failed_parts(failed, errored)})", {"red": True}))
    segments.append((f"  skipped: {skipped}", {"yellow": True} if skipped else {}))
    segments.append((f"  pass rate: {rate:.1%}{interval_text(interval)}", {}))
    return segments


UNGRADED_WHY = {
    "no_grader": "{entrypoint} defines no Grader",
    "no_label": "rows with no ground_truth or metadata: the grader did not run",
    "not_graded": "the grader set no reward",
}


def ungraded_line(summary: dict[str, Any], entrypoint: str | None) -> str | None:
    """``ungraded: 8 rows (rollouts/x/main.py defines no Grader)``, or None when every row
    that ran was graded."""
    count = (summary.get("rows") or {}).get("ungraded") or 0
    if not count:
        return None
    shown = _relative(entrypoint) if entrypoint else "the rollout"
    whys = summary.get("ungraded_why") or ["not_graded"]
    why = "; ".join(UNGRADED_WHY.get(w, w).format(entrypoint=shown) for w in whys)
    return f"ungraded: {count} row{'' if count == 1 else 's'} ({why})"


def _relative(path: str) -> str:
    """``path`` relative to the working directory when it is under it."""
    try:
        return Path(path).resolve().relative_to(Path.cwd()).as_posix()
    except (ValueError, OSError):
        return path


def interval_text(interval: Any, fmt: str = "{:.1%}") -> str:
    """`` [74.1%, 88.6%] (95%)`` for a report's ``{low, high, confidence}``, else nothing."""
    if not isinstance(interval, dict):
        return ""
    low, high = fmt.format(interval["low"]), fmt.format(interval["high"])
    return f" [{low}, {high}] ({percent(interval['confidence'])})"


def summary_segments(
    report: RunReport, summary: dict[str, Any], *, slowest: int = 5, entrypoint: str | None = None
) -> list[list[Segment]]:
    """The human summary printed at the end of the session, as lines of marked-up pieces.

    Counts add up: ``passed + failed + skipped`` is the total, for rows and for attempts;
    ``failed`` splits into ``errored`` (a rollout errored) and ``below threshold`` (scored low),
    the words the HTML cards and ``report.json``'s schema use.
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
                rows.get("pass_rate_interval"),
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
                    summary.get("pass_rate_interval"),
                ),
            ]
        )
    ungraded = ungraded_line(summary, entrypoint)
    if ungraded:
        segments.append([(ungraded, {"yellow": True})])
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
            "reward: mean {mean}{interval}  median {median}  std {std}  min {min}  max {max}".format(
                interval=interval_text(stats.get("mean_interval"), "{:.3g}")
                + (
                    f" ({left} errored attempts left out)"
                    if (left := stats.get("errored_left_out"))
                    else ""
                ),
                **{k: _fmt(stats.get(k)) for k in ("mean", "median", "std", "min", "max")},
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
    timings = report.timings(slowest)
    if timings.count:
        wall = summary.get("rollouts_wall_s")
        median = timings.median_ms or 0.0
        lines.append(
            f"rollout time: sum {timings.total_ms / 1000:.2f}s  median {median / 1000:.3f}s"
            + (f"  wall {wall:.2f}s" if wall is not None else "")
        )
        if timings.count > 1:
            lines.append(
                "slowest: "
                + ", ".join(f"{label} {ms / 1000:.2f}s" for ms, label in timings.slowest)
            )
    if timings.flaky:
        lines.append("flaky rows (mixed results): " + ", ".join(timings.flaky))
    return lines
