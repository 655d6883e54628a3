"""SIGINT and SIGTERM at any point of a real plugin run, with both cores busy.

Wherever the signal lands (rows starting, rows running, pytest writing its reports), the run
stops the way Ctrl-C stops pytest: exit status 2, a ``report.json`` that says the run is
incomplete and names the signal, a journal holding exactly the rows the summary counts, no
hang, and the process's previous handlers back in place once the run is done. Each run is a
pytest process of its own over rows that say what they do (see ``journal_workspace``);
two CPU-bound processes keep both cores busy meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
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
]
WAIT_SEC = 120.0

CONFTEST = """
import atexit
import os
import signal
import time
from pathlib import Path

import pytest

BEFORE = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}


@atexit.register
def _handlers_after_the_run():
    same = all(signal.getsignal(s) is h for s, h in BEFORE.items())
    Path("handlers.txt").write_text("restored" if same else "changed")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    if os.environ.get("HOLD_REPORTS"):
        # pytest is writing its reports: the test signals now, then lets it go on.
        Path("reporting.flag").write_text("1")
        for _ in range(1200):
            if Path("go.flag").exists():
                break
            time.sleep(0.05)
"""


@pytest.fixture
def busy_cores() -> Iterator[None]:
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
        for burner in burners:
            burner.wait(30)


def _wait_until(proc: subprocess.Popen[str], ready: Path | tuple[Path, int]) -> None:
    deadline = time.monotonic() + WAIT_SEC
    while True:
        if isinstance(ready, Path):
            if ready.exists():
                return
        elif len(journal_lines(ready[0])) >= ready[1]:
            return
        if proc.poll() is not None:
            raise AssertionError(
                f"the run ended early:\n{proc.stdout.read() if proc.stdout else ''}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"{ready} not reached within {WAIT_SEC:g}s")
        time.sleep(0.05)


@pytest.mark.usefixtures("busy_cores")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("point", ["rows starting", "rows running", "pytest reporting"])
def test_a_signal_at_any_point_of_a_run_stops_it_with_exit_2_and_an_incomplete_report(
    tmp_path: Path, signum: signal.Signals, point: str
) -> None:
    steps = {
        "rows starting": ["hang"] * 4,
        "rows running": ["answer"] * 3 + ["hang"] * 3,
        "pytest reporting": ["answer"] * 3,
    }[point]
    root = write_workspace(tmp_path, steps)
    (root / "conftest.py").write_text(CONFTEST)
    out = root / "out"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if point == "pytest reporting":
        env["HOLD_REPORTS"] = "1"
    proc = subprocess.Popen(
        RUN, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    try:
        if point == "rows starting":
            _wait_until(proc, root / "executed.txt")  # a rollout started, none finished
        elif point == "rows running":
            _wait_until(proc, (out, 3))
        else:
            _wait_until(proc, root / "reporting.flag")
        proc.send_signal(signum)
        (root / "go.flag").write_text("1")
        output, _ = proc.communicate(timeout=WAIT_SEC)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, output[-3000:]
    summary = json.loads((out / "report.json").read_text())["summary"]
    assert summary["complete"] is False, summary
    assert summary["interrupted"] is True
    assert summary["stopped_by"] == signum.name
    assert summary["rows"]["total"] == len(journal_lines(out)), summary
    assert (root / "handlers.txt").read_text() == "restored"


_WATCH = """
import signal
from pytest_osmosis.signals import SignalWatch

def mine(signum, frame):
    print("the user's handler")

signal.signal(signal.SIGINT, mine)
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # e.g. started under nohup
watch = SignalWatch()
watch.install()
try:
    signal.raise_signal(signal.SIGINT)
    print("not raised")
except KeyboardInterrupt:
    print("KeyboardInterrupt, received", watch.received)
signal.raise_signal(signal.SIGTERM)
print("SIGTERM ignored, received", watch.received, "exit", watch.exit_status(0))
watch.rows_over()
signal.raise_signal(signal.SIGINT)
print("after the rows: remembered, not raised")
watch.restore()
print("restored:", signal.getsignal(signal.SIGINT) is mine,
      signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)
signal.raise_signal(signal.SIGINT)
"""


def test_the_watch_raises_while_rows_run_remembers_after_and_keeps_an_ignored_signal() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WATCH], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "KeyboardInterrupt, received SIGINT",
        "SIGTERM ignored, received SIGINT exit 2",
        "after the rows: remembered, not raised",
        "restored: True True",
        "the user's handler",
    ]
