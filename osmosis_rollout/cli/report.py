"""``osmosis-rollout report rebuild RUN_DIR``: the JSON report of a run, from its journal.

A run killed half way (``kill -9``, an OOM kill, a workflow's ``os._exit()``) leaves
``run.json`` and ``rows.jsonl`` but no ``report.json``. This command writes
``RUN_DIR/report.json`` (or ``--output PATH``) from them: every finished row, the ids of the
rows that never ran, and ``summary.complete`` saying whether that is all of them. Exit
status 0 when written, 2 when ``RUN_DIR`` is not a run directory or the report could not
be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from osmosis_rollout.runs.journal import RunJournalError, write_json_atomic
from osmosis_rollout.runs.report import rebuild_report

__all__ = ["add_parser", "describe_summary", "run_rebuild"]

EXIT_OK = 0
EXIT_USAGE = 2


def add_parser(subparsers: Any) -> None:
    """Register ``report rebuild``."""
    report = subparsers.add_parser(
        "report",
        help="work with a pytest-osmosis run's report",
        description="Work with the report of a pytest-osmosis run directory.",
    )
    actions = report.add_subparsers(dest="report_command", required=True)
    rebuild = actions.add_parser(
        "rebuild",
        help="write report.json of a run directory from its journal (rows.jsonl)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rebuild.add_argument(
        "run_dir", metavar="RUN_DIR", help="the run directory (.osmosis/runs/<run>)"
    )
    rebuild.add_argument(
        "--output", metavar="PATH", help="write here (default RUN_DIR/report.json)"
    )
    rebuild.set_defaults(handler=run_rebuild)


def describe_summary(summary: dict[str, Any]) -> str:
    """One line: row counts, pass rate, and whether the run is complete."""
    rows = summary["rows"]
    line = (
        f"rows: {rows['total']}  passed: {rows['passed']}  failed: {rows['failed']}"
        f"  skipped: {rows['skipped']}  not run: {rows['not_run']}"
        f"  pass rate: {rows['pass_rate']:.1%}"
    )
    if summary.get("complete"):
        return line + "  complete"
    stopped = summary.get("stopped_by")
    return line + "  INCOMPLETE" + (f" (stopped by {stopped})" if stopped else "")


def run_rebuild(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Rebuild and write the report; print where it went and its one-line summary."""
    out, err = out or sys.stdout, err or sys.stderr
    run_dir = Path(args.run_dir)
    try:
        document, bad = rebuild_report(run_dir)
    except RunJournalError as exc:
        print(f"osmosis-rollout report rebuild: {exc}", file=err)
        return EXIT_USAGE
    target = Path(args.output) if args.output else run_dir / "report.json"
    try:
        write_json_atomic(target, document)
    except OSError as exc:
        print(f"osmosis-rollout report rebuild: could not write {target}: {exc}", file=err)
        return EXIT_USAGE
    if bad:
        print(f"skipped {bad} unreadable journal line(s) (a torn last write)", file=out)
    print(describe_summary(document["summary"]), file=out)
    print(f"report: {target}", file=out)
    return EXIT_OK
