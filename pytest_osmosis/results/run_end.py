"""The run's end: its verdict over every row, the report files, the gates and the summary.

:class:`RunSummary` is a plugin object of its own (registered as ``osmosis-summary``). It
notes each reported row (on the controlling process: pytest-xdist workers' reports arrive
there), and at the end reads the rows back from the journal, once: every figure, the
exit status included, covers the rows pytest reported and the rows a resume kept; a row that
finished ahead of pytest when ``-x`` or ``--maxfail`` stopped it counts nowhere (pytest does
not count it either) and is a row not run, while after a signal every journaled row counts. Then it writes ``run.json``, ``report.json`` and the other
report files, applies the gates and prints the ``osmosis summary`` section.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from osmosis_rollout.runs.journal import JOURNAL_FILENAME
from pytest_osmosis.keys import REPORT_ATTR, WORD_ATTR
from pytest_osmosis.options import resolve_path
from pytest_osmosis.results.output_paths import OutputWrite, write_outputs
from pytest_osmosis.results.report import summary_segments, ungraded_line
from pytest_osmosis.results.stopped import EXIT_WRITE_FAILED, how_it_ended, incomplete_lines

if TYPE_CHECKING:
    from pytest_osmosis.options import OsmosisSettings
    from pytest_osmosis.results.gates import GateResult
    from pytest_osmosis.results.report import RunReport
    from pytest_osmosis.results.resume import Resume
    from pytest_osmosis.results.run_folder import RunFolder
    from pytest_osmosis.signals import SignalWatch

__all__ = ["SUMMARY_PLUGIN", "RunSummary", "SummaryHost"]

SUMMARY_PLUGIN = "osmosis-summary"


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

    def write_run_file(self, finished: dict[str, Any] | None) -> None:
        """Write ``run.json``."""


class RunSummary:
    """Collects the reported rows and, at the end, reports the whole run."""

    def __init__(self, session: SummaryHost) -> None:
        self.session = session
        self.result: dict[str, Any] | None = None
        """What ``pytest_sessionfinish`` computed for the terminal summary."""
        self._pytest_session: pytest.Session | None = None
        self._summary_started = False

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self._pytest_session = session

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
        if report.when != "call" or not isinstance(value, dict):
            return
        # The row's record is in the journal, read back at the end: only that pytest
        # reported it is kept (pytest keeps every report for the session).
        osmosis.report.reported.add(value["nodeid"])
        delattr(report, REPORT_ATTR)
        hook = osmosis.config.hook.pytest_osmosis_row_finished
        if hook.get_hookimpls():
            hook(
                row={k: value[k] for k in ("nodeid", "dataset", "row_key")},
                result={k: value[k] for k in ("verdict", "attempts", "stats")},
                report=report,
            )

    def pytest_report_teststatus(
        self, report: pytest.TestReport
    ) -> tuple[str, str, tuple[str, dict[str, bool]]] | None:
        """``-v`` shows a row's reward beside its outcome: ``PASSED reward=1.0``."""
        word = getattr(report, WORD_ATTR, None)
        if report.when != "call" or not isinstance(word, str) or report.outcome == "skipped":
            return None
        if self._summary_started:
            return None  # pytest's short summary keeps its own "FAILED nodeid - message" lines
        if report.passed:
            return "passed", ".", (f"PASSED {word}", {"green": True})
        return "failed", "F", (f"FAILED {word}", {"red": True})

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Say how the run ended, write the report files and apply the gates (controller only).

        A file that cannot be written is reported after the summary, and the run exits
        :data:`~pytest_osmosis.results.stopped.EXIT_WRITE_FAILED`.
        """
        osmosis = self.session
        if osmosis.is_worker or osmosis.config.option.collectonly:
            return
        report = osmosis.report
        report.close()
        if not report.reported and not osmosis.selected:
            osmosis.folder.abandon()
            return
        try:
            self._finish(session, int(exitstatus))
        finally:
            osmosis.folder.release()

    def _finish(self, session: pytest.Session, exitstatus: int) -> None:
        from pytest_osmosis.results.gates import apply_gates

        osmosis = self.session
        report, plan, stop = osmosis.report, osmosis.resume.plan, osmosis.folder.write_failure
        if stop is not None:
            finished = {"stopped_by": stop, "interrupted": False}
        else:
            finished = how_it_ended(session, exitstatus, osmosis.signals.received)
        counted = None
        if not finished.get("interrupted"):
            # -x, --maxfail or a write that failed: pytest stopped reporting, and a row that
            # finished ahead of it counts nowhere (pytest does not count it). A signal's
            # report counts every journaled row, as the journal holds them.
            counted = report.reported | set(plan.kept if plan is not None else ())
        if exitstatus == pytest.ExitCode.INTERRUPTED and not finished.get("interrupted"):
            # pytest-xdist ends -x/--maxfail as an interrupt; without xdist it is a failure.
            exitstatus = session.exitstatus = pytest.ExitCode.TESTS_FAILED
        report.finish(selected=osmosis.selected, finished=finished, counted=counted)
        rows = report.summary()["rows"]
        if rows["total"] and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            # The verdict of every row of the run, those a resume kept included.
            exitstatus = pytest.ExitCode.TESTS_FAILED if rows["failed"] else pytest.ExitCode.OK
            session.exitstatus = exitstatus
        settings = osmosis.settings
        gates = apply_gates(
            settings,
            report,
            baseline=resolve_path(osmosis.config, settings.baseline) if settings.baseline else None,
            testsfailed=session.testsfailed,
            exitstatus=exitstatus,
        )
        written, failures, head = self._write_files(
            gates, {**finished, "preflight": report.preflight}
        )
        self.result = {
            "summary": head["summary"],
            # Read from the journal now: a run-finished hook may move the run directory.
            "segments": summary_segments(
                report, head["summary"], entrypoint=(head.get("config") or {}).get("entrypoint")
            ),
            "not_run": head["not_run"],
            "gate_lines": gates.lines,
            "verdicts": [*gates.verdicts, *self._grader_required(head)],
            "paths": [
                str(resolve_path(osmosis.config, w)) for w in written if not w.endswith("run.json")
            ],
            "write_failures": failures,
        }
        if gates.exit_override is not None:
            session.exitstatus = gates.exit_override
        if self._grader_required(head) and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if stop is not None or failures:
            # A run file that could not be written: the run's outcome is not on disk.
            session.exitstatus = EXIT_WRITE_FAILED
        report_json = str(osmosis.output / "report.json")
        osmosis.config.hook.pytest_osmosis_run_finished(
            summary=head["summary"], report_path=report_json if report_json in written else None
        )

    def _grader_required(self, head: dict[str, Any]) -> list[tuple[str, bool]]:
        """The ``--osmosis-require-grader`` verdict when rows ran ungraded (it fails the run)."""
        if not self.session.settings.require_grader:
            return []
        line = ungraded_line(head["summary"], (head.get("config") or {}).get("entrypoint"))
        if line is None:
            return []
        return [(f"require-grader: {line.removeprefix('ungraded: ')}: failed", False)]

    def _write_files(
        self, gates: GateResult, finished: dict[str, Any]
    ) -> tuple[list[str], list[str], dict[str, Any]]:
        """Write run.json and the report files: the paths written, the failures, the head."""
        osmosis = self.session
        report, settings, output = osmosis.report, osmosis.settings, osmosis.output
        extra = dict(gates.extra)
        plan = osmosis.resume.plan
        if plan is not None:
            extra["resume"] = plan.describe()
        head = report.document(extra)
        writes = [
            OutputWrite(
                "run file",
                str(output / "run.json"),
                functools.partial(osmosis.write_run_file, finished),
            ),
            OutputWrite(
                "JSON report",
                str(output / "report.json"),
                functools.partial(report.write_json, output / "report.json"),
            ),
        ]
        if settings.report:
            report_path = resolve_path(osmosis.config, settings.report)
            writes.append(
                OutputWrite(
                    "JSON report",
                    settings.report,
                    functools.partial(report.write_json, report_path),
                )
            )
        if settings.html:
            from pytest_osmosis.results.html import write_html

            html_path = resolve_path(osmosis.config, settings.html)

            writes.append(
                OutputWrite(
                    "HTML report", settings.html, functools.partial(write_html, html_path, head)
                )
            )
        written, failures = write_outputs(writes)
        return written, failures, head

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self._summary_started = True
        result = self.result
        if result is None:
            return
        osmosis = self.session
        terminalreporter.section("osmosis summary")
        for segments in result["segments"]:
            for text, markup in segments:
                terminalreporter.write(text, **markup)
            terminalreporter.line("")
        for line in incomplete_lines(result["summary"], result["not_run"]):
            terminalreporter.write_line(line, red=True, bold=True)
        for line in result["gate_lines"]:
            terminalreporter.write_line(line, red=line.lstrip().startswith("REGRESSED"))
        if osmosis.folder.torn_bytes:
            terminalreporter.write_line(
                f"osmosis: {osmosis.output / JOURNAL_FILENAME}: cut a torn last line "
                f"({osmosis.folder.torn_bytes} bytes) left by a run that stopped mid-write"
            )
        plan = osmosis.resume.plan
        for line in plan.lines() if plan is not None else ():
            terminalreporter.write_line(line)
        for path in result["paths"]:
            terminalreporter.write_line(f"report: {path}")
        if osmosis.log_failure:
            terminalreporter.write_line(
                f"osmosis: could not write {osmosis.output / 'rollouts.log'}: "
                f"{osmosis.log_failure} (the log stopped there)",
                red=True,
            )
        for line in result["write_failures"]:
            terminalreporter.write_line(line, red=True)
        # The verdicts come last: the line a reader looks for, just before pytest's own.
        for line, passed in result["verdicts"]:
            terminalreporter.write_line(line, green=passed, red=not passed, bold=True)
