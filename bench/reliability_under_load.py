"""Run the reliability suite with every core saturated by CPU burners (issue 13, defect 6).

The suite must pass on a busy machine, not only on a quiet one: admission on a stale
keep-alive connection, long polls that outlive their read timeout and a uvicorn thread
that must stop all show up only under load. This starts one busy-looping process per core
(``--burners`` to change), runs ``pytest tests/reliability`` (or the pytest arguments given
after ``--``), stops every burner it started, and prints a table::

    .venv/bin/python bench/reliability_under_load.py
    .venv/bin/python bench/reliability_under_load.py --burners 4 -- tests/reliability/test_load.py

The burners run at normal priority, so the suite competes with them for every core.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BURNER = "while True:\n    pass\n"


def start_burners(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` processes that each spin one core until stopped."""
    return [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(count)]


def stop_burners(burners: list[subprocess.Popen[bytes]]) -> None:
    """Terminate (then kill) exactly the burners started here."""
    for burner in burners:
        burner.terminate()
    for burner in burners:
        try:
            burner.wait(timeout=5)
        except subprocess.TimeoutExpired:
            burner.kill()
            burner.wait(timeout=5)


def load_average() -> str:
    try:
        return "/".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--burners", type=int, default=os.cpu_count() or 2, help="busy processes (default: cores)"
    )
    parser.add_argument("--timeout", type=float, default=1800, help="bound on the pytest run (s)")
    parser.add_argument(
        "--log",
        type=Path,
        default=None,
        help="write pytest's full output here (default: a temp file)",
    )
    parser.add_argument(
        "pytest_args", nargs="*", help="pytest arguments instead of tests/reliability (after --)"
    )
    args = parser.parse_args()
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        *(args.pytest_args or ["tests/reliability"]),
    ]
    burners = start_burners(args.burners)
    started = time.monotonic()
    try:
        time.sleep(2)  # let the burners take the cores before the suite starts
        load_before = load_average()
        completed = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, timeout=args.timeout
        )
        load_after = load_average()
    finally:
        stop_burners(burners)
    elapsed = time.monotonic() - started
    summary = completed.stdout.strip().splitlines()[-1] if completed.stdout.strip() else ""
    log = args.log or Path(tempfile.mkstemp(prefix="reliability-under-load-", suffix=".log")[1])
    log.write_text(completed.stdout + completed.stderr)
    print(f"pytest output: {log}")
    print()
    print("| burners | cores | load avg before | load avg after | wall (s) | exit | pytest |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| {args.burners} | {os.cpu_count()} | {load_before} | {load_after} | "
        f"{elapsed:.0f} | {completed.returncode} | {summary} |"
    )
    return completed.returncode


if __name__ == "__main__":
    raise SystemExit(main())
