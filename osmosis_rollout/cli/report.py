"""``osmosis-rollout report rebuild RUN_DIR``: the JSON report of a run, from its journal.

A run killed half way (``kill -9``, an OOM kill, a workflow's ``os._exit()``) leaves
``run.json`` and ``rows.jsonl`` but no ``report.json``. This command writes
``RUN_DIR/report.json`` (or ``--output PATH``) from them: every finished row, the ids of the
rows that never ran, and ``summary.complete`` saying whether that is all of them; with
``--html PATH``, the HTML page of that report too. Exit status 0 when written, 2 when
``RUN_DIR`` is not a run directory, an output names one of its files (``run.json``,
``rows.jsonl``, ``rollouts.log``, a trajectory) or a file the run read (its dataset,
entrypoint, policy, eval config or baseline), both outputs name one path, or a file could
not be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from osmosis_rollout.runs.html import write_html
from osmosis_rollout.runs.journal import (
    JOURNAL_FILENAME,
    ROLLOUTS_LOG,
    RUN_FILENAME,
    TRAJECTORIES_DIR,
    RunJournalError,
    write_json_atomic,
)
from osmosis_rollout.runs.report import rebuild_report
from osmosis_rollout.workspace.entrypoint import split_reference

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
    rebuild.add_argument("--html", metavar="PATH", help="also write the report's HTML page here")
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


def _read_by_the_run(run_dir: Path, document: dict[str, Any]) -> dict[Path, str]:
    """The files the run read (resolved) -> what each is: its own run file, journal and log,
    and what its configuration and rows name (dataset, entrypoint, policy, eval config, baseline)."""
    config = document.get("config") or {}
    named = {
        "own run.json": str(run_dir / RUN_FILENAME),
        "own rows.jsonl": str(run_dir / JOURNAL_FILENAME),
        f"own {ROLLOUTS_LOG}": str(run_dir / ROLLOUTS_LOG),
        "eval config": config.get("eval_config"),
        "baseline": config.get("baseline"),
    }
    # Both are FILE_OR_MODULE[:ATTR] as given: the file is the part before the attribute.
    if isinstance(entrypoint := config.get("entrypoint"), str):
        named["rollout entrypoint"] = split_reference(entrypoint)[0]
    if isinstance(policy := config.get("policy"), str) and not policy.startswith("litellm:"):
        named["policy"] = split_reference(policy)[0]
    read = {Path(p).resolve(): what for what, p in named.items() if isinstance(p, str) and p}
    for line in document.get("row_verdicts") or []:
        if isinstance(line.get("dataset"), str):
            read.setdefault(Path(line["dataset"]).resolve(), "dataset")
    return read


def run_rebuild(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Rebuild and write the report; print where it went and its one-line summary."""
    out, err = out or sys.stdout, err or sys.stderr
    run_dir = Path(args.run_dir)
    target = Path(args.output) if args.output else run_dir / "report.json"
    try:
        document, bad = rebuild_report(run_dir)
    except RunJournalError as exc:
        print(f"osmosis-rollout report rebuild: {exc}", file=err)
        return EXIT_USAGE
    outputs = [("--output", target, write_json_atomic)]
    if args.html:
        outputs.append(("--html", Path(args.html), write_html))
    read = _read_by_the_run(run_dir, document)
    trajectories = (run_dir / TRAJECTORIES_DIR).resolve()
    for flag, path, _ in outputs:
        # The trajectories are the run's too (the page reads them): nothing inside is written.
        inside = path.resolve().is_relative_to(trajectories)
        what = "own trajectories folder" if inside else read.get(path.resolve())
        if what is not None:
            where = "inside " if inside else ""
            print(
                f"osmosis-rollout report rebuild: {flag} {path} is {where}the run's {what}; "
                "writing there would overwrite it: write the report somewhere else",
                file=err,
            )
            return EXIT_USAGE
    if args.html and Path(args.html).resolve() == target.resolve():
        # Written after the report, the page would replace the report it renders.
        print(
            f"osmosis-rollout report rebuild: --html {args.html} is where --output writes the "
            "report; two outputs on one path would overwrite each other: choose another path",
            file=err,
        )
        return EXIT_USAGE
    for _, path, write in outputs:
        try:
            write(path, document)
        except OSError as exc:
            print(f"osmosis-rollout report rebuild: could not write {path}: {exc}", file=err)
            return EXIT_USAGE
    if bad:
        print(f"skipped {bad} unreadable journal line(s) (a torn last write)", file=out)
    print(describe_summary(document["summary"]), file=out)
    print(f"report: {target}", file=out)
    if args.html:
        print(f"html: {args.html}", file=out)
    return EXIT_OK
