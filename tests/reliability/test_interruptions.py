"""What is on disk after a run is cut short: a row that exits, SIGINT and SIGKILL half way.

Each case runs pytest in its own process over rows that say what they do (see
``journal_workspace``): the healthy rows finish and are journaled, then the run is
interrupted while the others are still running. Afterwards ``rows.jsonl`` holds every row
that finished, whole; ``report.json`` (written by the run, or rebuilt from the journal with
``osmosis-rollout report rebuild``) says the run is incomplete and names the rows not run.
The waits poll the journal with a generous bound; nothing here depends on how fast the
machine is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from journal_workspace import journal_lines, row_ids, write_workspace

RUN = [
    sys.executable,
    "-m",
    "pytest",
    "-p",
    "no:cacheprovider",
    "--osmosis-dataset=data/test.jsonl",
    "--osmosis-policy=policy.py:policy",
    "--osmosis-output=out",
]
WAIT_SEC = 120.0


def start(root: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        RUN,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def wait_for_journal(proc: subprocess.Popen[str], out: Path, lines: int) -> None:
    deadline = time.monotonic() + WAIT_SEC
    while len(journal_lines(out)) < lines:
        if proc.poll() is not None:
            raise AssertionError(
                f"the run ended early:\n{proc.stdout.read() if proc.stdout else ''}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"fewer than {lines} journal lines after {WAIT_SEC:g}s")
        time.sleep(0.05)


def rebuild(out: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "osmosis_rollout.cli", "report", "rebuild", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    document: dict[str, Any] = json.loads((out / "report.json").read_text())
    return document


def test_sigkill_half_way_leaves_every_finished_row_and_a_rebuildable_report(
    tmp_path: Path,
) -> None:
    root = write_workspace(tmp_path, ["answer"] * 5 + ["hang"] * 5)
    proc = start(root)
    try:
        wait_for_journal(proc, root / "out", 5)
        proc.kill()
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == -signal.SIGKILL
    assert not (root / "out" / "report.json").exists()
    lines = journal_lines(root / "out")
    assert sorted(str(line["nodeid"]) for line in lines) == row_ids(range(5))
    document = rebuild(root / "out")
    summary = document["summary"]
    assert summary["complete"] is False
    assert summary["stopped_by"] == "killed"
    assert summary["rows"]["passed"] == 5
    assert document["not_run"] == row_ids(range(5, 10))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_half_way_writes_an_incomplete_report_naming_the_rows_not_run(
    tmp_path: Path, signum: signal.Signals
) -> None:
    root = write_workspace(tmp_path, ["answer"] * 5 + ["hang"] * 5)
    proc = start(root)
    try:
        wait_for_journal(proc, root / "out", 5)
        proc.send_signal(signum)
        output, _ = proc.communicate(timeout=WAIT_SEC)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    document = json.loads((root / "out" / "report.json").read_text())
    summary = document["summary"]
    assert summary["complete"] is False
    assert summary["interrupted"] is True
    assert summary["stopped_by"] == signum.name
    assert summary["rows"]["passed"] == 5
    assert document["not_run"] == row_ids(range(5, 10))
    assert f"INCOMPLETE: stopped by {signum.name}: 5 of 10 rows not run" in output
    # The journal and the report agree.
    assert sorted(str(line["nodeid"]) for line in journal_lines(root / "out")) == row_ids(range(5))


def test_a_row_calling_os_exit_leaves_the_finished_rows_on_disk(tmp_path: Path) -> None:
    root = write_workspace(tmp_path, ["answer"] * 5 + ["after 5; exit", "hang", "hang"])
    proc = start(root)
    output, _ = proc.communicate(timeout=WAIT_SEC)
    assert proc.returncode == 3, output[-3000:]
    assert sorted(str(line["nodeid"]) for line in journal_lines(root / "out")) == row_ids(range(5))
    run = json.loads((root / "out" / "run.json").read_text())
    assert run["selected"] == row_ids(range(8)) and run["finished"] is None
    document = rebuild(root / "out")
    assert document["summary"]["complete"] is False
    assert document["not_run"] == row_ids(range(5, 8))


EXITING_MAIN = """
import asyncio
import sys

from osmosis_rollout import AgentWorkflow, Grader


class Exits(AgentWorkflow):
    async def run(self, ctx):
        text = ctx.prompt[-1]["content"]
        if "system-exit" in text:
            sys.exit(3)
        if "keyboard-interrupt" in text:
            raise KeyboardInterrupt
        return [*ctx.prompt, {"role": "assistant", "content": "ok"}]


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)
"""


@pytest.mark.parametrize(
    ("step", "named"), [("system-exit", "SystemExit"), ("keyboard-interrupt", "KeyboardInterrupt")]
)
def test_a_row_raising_systemexit_or_keyboardinterrupt_fails_alone_and_everything_is_on_disk(
    tmp_path: Path, step: str, named: str
) -> None:
    root = write_workspace(tmp_path, ["answer", "answer", step, "answer", "answer"])
    (root / "rollouts" / "steps" / "main.py").write_text(EXITING_MAIN)
    proc = subprocess.run(
        [*RUN, "--osmosis-agent-timeout=60", "--osmosis-grader-timeout=60"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=WAIT_SEC,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.TESTS_FAILED, output[-3000:]
    document = json.loads((root / "out" / "report.json").read_text())
    verdicts = {r["nodeid"]: r["verdict"] for r in document["row_verdicts"]}
    assert verdicts == {
        **dict.fromkeys(row_ids([0, 1, 3, 4]), "passed"),
        row_ids([2])[0]: "failed",
    }
    failed = next(r for r in document["rows"] if r["nodeid"] == row_ids([2])[0])
    assert named in (failed["err_message"] or "")
    assert document["summary"]["complete"] is True
    assert len(journal_lines(root / "out")) == 5
