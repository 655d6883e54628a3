"""The run's end: its verdict over every row, the report files, the gates and the summary.

:class:`RunSummary` (the ``osmosis-summary`` plugin) notes each row pytest reports, on the
controller. :func:`decide_run` reads the rows back from the journal once (a row that finished
ahead of ``-x`` or ``--maxfail`` counts nowhere, as in pytest; after a signal every journaled
row counts), builds the report document once, applies the gates and decides the verdict:
each gate runs as a test case, every report file is written from that one document, and
the verdict becomes the exit status.
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from osmosis_rollout._internal.atomic import write_text_atomic
from osmosis_rollout.runs.journal import JOURNAL_FILENAME
from osmosis_rollout.runs.report import tool_version
from osmosis_rollout.runs.report_model import RunVerdict
from osmosis_rollout.runs.run_verdict import decide
from pytest_osmosis.keys import REPORT_ATTR, WORD_ATTR
from pytest_osmosis.options import resolve_path
from pytest_osmosis.results.failure_groups import FailureGroups
from pytest_osmosis.results.gate_cases import planned_gates, run_gate_cases
from pytest_osmosis.results.gates import GateResult, apply_gates
from pytest_osmosis.results.markdown import (
    STEP_SUMMARY_ENV,
    RowMiss,
    append_markdown,
    render_markdown,
)
from pytest_osmosis.results.output_paths import OutputWrite, write_outputs
from pytest_osmosis.results.report import summary_segments
from pytest_osmosis.results.stopped import how_it_ended, incomplete_lines

if TYPE_CHECKING:
    from pytest_osmosis.options import OsmosisSettings
    from pytest_osmosis.results.report import RunReport
    from pytest_osmosis.results.resume import Resume
    from pytest_osmosis.results.run_folder import RunFolder
    from pytest_osmosis.signals import SignalWatch

__all__ = ["SUMMARY_PLUGIN", "RunSummary", "SummaryHost"]

SUMMARY_PLUGIN = "osmosis-summary"

_VERDICT_STATUSES = {
    pytest.ExitCode.OK,
    pytest.ExitCode.TESTS_FAILED,
    pytest.ExitCode.INTERRUPTED,
    pytest.ExitCode.NO_TESTS_COLLECTED,
}
"""pytest's statuses the verdict replaces (an internal or usage error stays pytest's)."""

SHOWN_ROWS = 10
"""Rows below the threshold the terminal lists by name (the reports list every one)."""


def _utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class SummaryHost(Protocol):
    """What the summary reads of the session (:class:`~pytest_osmosis.run.session.OsmosisSession`)."""

    config: pytest.Config
    settings: OsmosisSettings
    output: Path
    is_worker: bool
    report: RunReport
    folder: RunFolder
    resume: Resume
    signals: SignalWatch
    selected: list[str]
    log_failure: str | None
    run_name: str

    def write_run_file(self, finished: dict[str, Any] | None) -> None:
        """Write ``run.json``."""


@dataclass(frozen=True)
class Decided:
    """The run's end as decided once: how it ended, its report, its gates, what failed."""

    finished: dict[str, Any]
    document: dict[str, Any]
    """``report.json``'s content, the verdict included: every report file is written from it."""
    gates: GateResult
    gated: bool
    """A pass-rate gate judges the rows."""
    other_failures: int
    """pytest's failed items that are neither rows nor gates."""
    stopped: str | None
    """A run file that could not be written stopped the run: why."""
    signal: str | None
    """The signal received when it was decided (a later one decides again)."""

    def verdict(self, unwritten: Sequence[str] = ()) -> RunVerdict:
        """The run's verdict, ``unwritten`` being one line per file that could not be written."""
        stopped = [f"osmosis: stopped: {self.stopped}"] if self.stopped is not None else []
        return decide(
            self.document["summary"],
            gates=self.gates.verdicts,
            gated=self.gated,
            other_failures=self.other_failures,
            disk=[*stopped, *unwritten],
        )


def decide_run(
    osmosis: SummaryHost, session: pytest.Session, exitstatus: int, *, other: int, started: str
) -> Decided:
    """Finish the report over the rows this run counts, build its document, apply the gates
    to it and decide the verdict; ``other`` failed items are neither rows nor gates."""
    report, plan, stop = osmosis.report, osmosis.resume.plan, osmosis.folder.write_failure
    received = osmosis.signals.received
    if stop is not None:
        finished = {"stopped_by": stop, "interrupted": False}
    else:
        finished = how_it_ended(session, exitstatus, received)
    counted = None
    if not finished["interrupted"]:
        # A signal's report counts every journaled row; otherwise a row pytest did not report
        # (-x, --maxfail or a write that failed stopped it) counts nowhere, as in pytest.
        counted = report.reported | set(plan.kept if plan is not None else ())
    report.finish(selected=osmosis.selected, finished=finished, counted=counted)
    finished = report.finished
    settings = osmosis.settings
    document = report.document()
    baseline = resolve_path(osmosis.config, settings.baseline) if settings.baseline else None
    gates = apply_gates(settings, document, baseline=baseline)
    gated = settings.min_pass_rate is not None
    decided = Decided(finished, document, gates, gated, other, stop, received)
    extra = dict(gates.extra)
    if plan is not None:
        extra["resume"] = plan.describe()
    extra.update(
        verdict=decided.verdict().model_dump(),
        run_id=osmosis.run_name,
        started_at=started,
        finished_at=_utc_now(),
        tool_version=tool_version(),
    )
    # Redacted as the rest of the document's head was; the row lists stay last, as
    # `osmosis-rollout report rebuild` writes them.
    rows = {key: document.pop(key) for key in ("rows", "row_verdicts")}
    document.update(report.redactor.redact_shared(extra), **rows)
    return decided


def write_report_files(
    osmosis: SummaryHost, decided: Decided, misses: list[RowMiss]
) -> tuple[list[str], list[str]]:
    """Write ``run.json`` and every report file from ``decided``'s document: the paths
    written (as shown) and one line per file that could not be written."""
    config, settings, output = osmosis.config, osmosis.settings, osmosis.output
    report, document = osmosis.report, decided.document
    finished = {**decided.finished, "preflight": report.preflight}
    run_file = functools.partial(osmosis.write_run_file, finished)
    writes = [OutputWrite("run file", str(output / "run.json"), run_file)]
    for shown in [str(output / "report.json"), *([settings.report] if settings.report else [])]:
        json_file = functools.partial(report.write_json, resolve_path(config, shown))
        writes.append(OutputWrite("JSON report", shown, json_file))
    if settings.html:
        from osmosis_rollout.runs.html import write_html

        html = functools.partial(write_html, resolve_path(config, settings.html), document)
        writes.append(OutputWrite("HTML report", settings.html, html))
    if settings.markdown:
        path, text = resolve_path(config, settings.markdown), render_markdown(document, misses)
        markdown = functools.partial(write_text_atomic, path, text)
        writes.append(OutputWrite("markdown summary", settings.markdown, markdown))
    return write_outputs(writes)


class RunSummary:
    """Collects the reported rows and, at the end, reports the whole run."""

    def __init__(self, session: SummaryHost) -> None:
        self.session = session
        # The failed rows by what failed: a repeated failure is printed in full once.
        self.failure_groups = FailureGroups(lambda text: self.session.report.redactor.redact(text))
        self.decided: Decided | None = None
        self.verdict: RunVerdict | None = None
        """The run's verdict as the exit status holds it, once its files are written."""
        self.paths: list[str] = []
        self.write_failures: list[str] = []
        self.started_at = _utc_now()
        self.row_misses: list[RowMiss] = []
        """Reported rows that failed, or that a pass-rate gate tolerated, in report order."""
        self._pytest_session: pytest.Session | None = None
        self._summary_started = False
        self._row_failures = 0  # row reports pytest counted failed; the rest are other tests
        self._gate_failures = 0
        self._planned: int | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._pytest_session = session
        self.started_at = _utc_now()

    def pytest_runtest_logstart(self) -> None:
        """Count the gate cases in pytest's progress, once collection (xdist's too) is over."""
        session = self._pytest_session
        if self._planned is None and session is not None and not self.session.is_worker:
            self._planned = planned_gates(self.session.settings)
            session.testscollected += self._planned

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each row's record from its report (controller only; workers' reports arrive here)."""
        osmosis = self.session
        if osmosis.is_worker:
            return
        session = self._pytest_session
        stop = osmosis.folder.write_failure
        if stop is not None and session is not None and not session.shouldstop:
            session.shouldstop = stop  # a run file could not be written: stop after this item
        value = getattr(report, REPORT_ATTR, None)
        if not isinstance(value, dict):
            return
        if report.failed:
            self._row_failures += 1
        if report.failed or hasattr(report, "wasxfail"):
            errored = any(a.get("status") == "failed" for a in value.get("attempts", ()))
            self.row_misses.append(
                RowMiss(report.nodeid, _first_line(report), errored, not report.failed)
            )
        # The row's record is in the journal, read back at the end: only that pytest
        # reported it is kept (pytest keeps every report for the session).
        osmosis.report.reported.add(value["nodeid"])
        self.failure_groups.add(report, value)
        delattr(report, REPORT_ATTR)
        osmosis.config.hook.pytest_osmosis_row_finished(
            row={k: value[k] for k in ("nodeid", "dataset", "row_key")},
            result={k: value[k] for k in ("verdict", "attempts", "stats")},
            report=report,
        )

    def pytest_report_teststatus(
        self, report: pytest.TestReport
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        """``-v`` shows a row's reward beside its outcome: ``PASSED reward=1.0``."""
        word = getattr(report, WORD_ATTR, None)
        shown = report.when == "call" and isinstance(word, str) and report.outcome != "skipped"
        if not shown or self._summary_started:  # the short summary keeps "FAILED nodeid - why"
            return None
        if report.passed:
            return "passed", ".", (f"PASSED {word}", {"green": True})
        return "failed", "F", (f"FAILED {word}", {"red": True})

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        """Once every row is reported, decide the verdict and run each gate as a test case
        while pytest still counts tests. This wrapper is outside the session plugin's (the
        engine is stopped by then) and inside the terminal's, which ends the progress line. A
        run pytest stopped (``-x``, ``--maxfail``, a signal) raises here instead: it is
        decided at ``pytest_sessionfinish``, with no gate cases."""
        result = yield
        osmosis = self.session
        if osmosis.is_worker or osmosis.config.option.collectonly or not self._has_rows():
            return result
        exitstatus = pytest.ExitCode.TESTS_FAILED if session.testsfailed else pytest.ExitCode.OK
        decided = self._decide(session, exitstatus)
        kept_failed = 0
        if osmosis.settings.min_pass_rate is None:
            # Failed rows pytest did not count: those a resume kept from the journal.
            kept_failed = int(decided.document["summary"]["rows"]["failed"]) - self._row_failures
        self._gate_failures = run_gate_cases(session, decided.verdict(), kept_failed=kept_failed)
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the report files with the run's verdict and make it the exit status
        (controller only). A signal received after the verdict was decided makes the run
        interrupted: it is decided again, and the files say so."""
        osmosis = self.session
        if osmosis.is_worker or osmosis.config.option.collectonly:
            return
        if not self._has_rows():
            osmosis.folder.abandon()
            return
        try:
            self._finish(session, int(exitstatus))
        finally:
            osmosis.folder.release()
        self.failure_groups.shorten_repeats()  # before pytest prints the failures

    def _has_rows(self) -> bool:
        """Whether the run has rows to report (the journal is closed from here on)."""
        if self.decided is not None:
            return True  # closed when it was decided: closing again drops the rows read back
        report = self.session.report
        report.close()
        return bool(report.reported or self.session.selected)

    def _decide(self, session: pytest.Session, exitstatus: int) -> Decided:
        other = session.testsfailed - self._row_failures - self._gate_failures
        self.decided = decide_run(
            self.session, session, exitstatus, other=other, started=self.started_at
        )
        return self.decided

    def _finish(self, session: pytest.Session, exitstatus: int) -> None:
        osmosis = self.session
        decided = self.decided
        if decided is None or decided.signal != osmosis.signals.received:
            decided = self._decide(session, exitstatus)
        written, failures = write_report_files(osmosis, decided, self.row_misses)
        report_json = str(osmosis.output / "report.json")
        osmosis.config.hook.pytest_osmosis_run_finished(
            summary=decided.document["summary"],
            report_path=report_json if report_json in written else None,
        )
        if (
            osmosis.signals.received != decided.signal
            and (osmosis.output / JOURNAL_FILENAME).exists()
        ):
            # A signal while the files were written (or a run-finished hook ran): the run
            # was interrupted, and its files must not say it was complete (unless the hook
            # moved the run folder away).
            decided = self._decide(session, exitstatus)
            written, failures = write_report_files(osmosis, decided, self.row_misses)
        if target := os.environ.get(STEP_SUMMARY_ENV):
            # GitHub Actions' job summary, appended once, with the final verdict.
            text = render_markdown(decided.document, self.row_misses)
            append = functools.partial(append_markdown, Path(target), text)
            failures += write_outputs([OutputWrite("job summary", target, append)])[1]
        # The report files already written say what was decided before any failed; the
        # exit status and the terminal say the outcome is not all on disk.
        verdict = decided.verdict(failures)
        self.verdict, self.write_failures = verdict, failures
        self.paths = [
            str(resolve_path(osmosis.config, w)) for w in written if not w.endswith("run.json")
        ]
        if session.exitstatus in _VERDICT_STATUSES:
            session.exitstatus = verdict.exit_status

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self._summary_started = True
        decided, verdict, osmosis = self.decided, self.verdict, self.session
        if decided is None or verdict is None:
            return
        tr, summary = terminalreporter, decided.document["summary"]
        tr.section("osmosis summary")
        entrypoint = (decided.document.get("config") or {}).get("entrypoint")
        for segments in summary_segments(osmosis.report, summary, entrypoint=entrypoint):
            for text, markup in segments:
                tr.write(text, **markup)
            tr.line("")
        for line in self.failure_groups.lines():
            tr.write_line(line, red=True)
        for line in incomplete_lines(summary, decided.document["not_run"]):
            tr.write_line(line, red=True, bold=True)
        for line in decided.gates.lines:
            tr.write_line(line, red=line.lstrip().startswith("REGRESSED"))
        if osmosis.folder.torn_bytes:
            tr.write_line(
                f"osmosis: {osmosis.output / JOURNAL_FILENAME}: cut a torn last line "
                f"({osmosis.folder.torn_bytes} bytes) left by a run that stopped mid-write"
            )
        plan = osmosis.resume.plan
        for line in plan.lines() if plan is not None else ():
            tr.write_line(line)
        for path in self.paths:
            tr.write_line(f"report: {path}")
        if osmosis.log_failure:
            tr.write_line(
                f"osmosis: could not write {osmosis.output / 'rollouts.log'}: "
                f"{osmosis.log_failure} (the log stopped there)",
                red=True,
            )
        for line in self.write_failures:
            tr.write_line(line, red=True)
        if tolerated := [miss.reason for miss in self.row_misses if miss.tolerated]:
            rows = f"{len(tolerated)} row" + ("s" if len(tolerated) != 1 else "")
            line = f"below the threshold, counted by the gate: {rows} (xfailed; -rx lists them too)"
            tr.write_line(line, yellow=True)
            for why in tolerated[:SHOWN_ROWS]:
                tr.write_line(f"  {why}")
            if len(tolerated) > SHOWN_ROWS:
                tr.write_line(f"  ... and {len(tolerated) - SHOWN_ROWS} more")
        # The gates come last: the line a reader looks for, just before pytest's own.
        for reason in verdict.reasons:
            if reason.kind == "gate":
                passed = reason.outcome == "passed"
                tr.write_line(reason.line, green=passed, red=not passed, bold=True)


def _first_line(report: pytest.TestReport) -> str:
    """The first line of why a row's report failed (an expected failure's reason)."""
    reason = getattr(report, "wasxfail", None)
    if not reason:
        crash = getattr(report.longrepr, "reprcrash", None)
        reason = getattr(crash, "message", None) or report.longreprtext
    first = str(reason).strip().splitlines()[0] if str(reason).strip() else report.nodeid
    return first.removeprefix("Failed: ")
