"""Interruptions in the verdict: a signal while the reports are written, and SIGHUP (a closed
terminal, a cancelled CI job), leave a report that says the run is incomplete, and exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from journal_workspace import journal_lines, write_workspace

RUN = [
    sys.executable,
    "-m",
    "pytest",
    "-p",
    "no:cacheprovider",
    "--osmosis-dataset=data/test.jsonl",
    "--osmosis-policy=policy.py:policy",
    "--osmosis-output=out",
    "--junitxml=junit.xml",
]
WAIT_SEC = 120.0

SIGNAL_WHILE_WRITING = """
import os
import signal


def pytest_osmosis_run_finished(summary, report_path):
    # The report files are written; pytest has not exited yet: the job is cancelled now.
    os.kill(os.getpid(), signal.SIGTERM)
"""


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return env


def _report(root: Path) -> dict[str, object]:
    document: dict[str, object] = json.loads((root / "out" / "report.json").read_text())
    return document


def test_sigterm_while_the_reports_are_written_leaves_an_incomplete_report(
    tmp_path: Path,
) -> None:
    root = write_workspace(tmp_path, ["answer"] * 3)
    (root / "conftest.py").write_text(SIGNAL_WHILE_WRITING)
    done = subprocess.run(
        RUN, cwd=root, env=_env(), capture_output=True, text=True, timeout=WAIT_SEC
    )
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout[-3000:]
    report = _report(root)
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert summary["complete"] is False and summary["interrupted"] is True
    assert summary["stopped_by"] == "SIGTERM"
    verdict = report["verdict"]
    assert isinstance(verdict, dict)
    assert verdict["outcome"] == "incomplete" and verdict["exit_status"] == 2
    assert verdict["reasons"][0]["line"] == "interrupted by SIGTERM: 0 of 3 rows not run"


def test_sighup_stops_a_run_as_sigterm_does_with_its_summary_and_report(
    tmp_path: Path,
) -> None:
    root = write_workspace(tmp_path, ["answer"] * 2 + ["hang"] * 2)
    proc = subprocess.Popen(
        RUN, cwd=root, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + WAIT_SEC
        while len(journal_lines(root / "out")) < 2:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "the rows did not finish in time"
            time.sleep(0.05)
        proc.send_signal(signal.SIGHUP)
        output, _ = proc.communicate(timeout=WAIT_SEC)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    assert "osmosis summary" in output and "INCOMPLETE: stopped by SIGHUP" in output
    summary = _report(root)["summary"]
    assert isinstance(summary, dict)
    assert summary["complete"] is False and summary["stopped_by"] == "SIGHUP"
    assert summary["rows"]["total"] == 2
