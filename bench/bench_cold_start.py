"""Cold start: what the plugin adds to ``pytest --help``, and ``--co`` over a dataset.

- ``pytest --help`` with the plugin (installed, loaded through its ``pytest11`` entry
  point) and with ``-p no:osmosis`` (the same interpreter, the plugin blocked);
- ``pytest --osmosis-dataset rows.jsonl --osmosis-policy policy.py:policy --co``: collect
  200 row items without running them.

Each command is a fresh process (wall time from spawn to exit) in an empty workspace with
its own ``pytest.ini``; commands interleaved, median of ``--repeats``. Then the plugin's
own import, from ``python -X importtime -c "import pytest_osmosis.plugin"``: the modules
it pulls in beyond pytest, largest first.

    .venv/bin/python bench/bench_cold_start.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import BASE_ENV, OURS_PYTHON, machine, median, null_workspace, table

COMMANDS = {
    "pytest --help (plugin)": ["-m", "pytest", "--help"],
    "pytest --help -p no:osmosis": ["-m", "pytest", "-p", "no:osmosis", "--help"],
    "pytest --osmosis-dataset (200 rows) --co": [
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--co",
        "--osmosis-dataset=data/rows200.jsonl",
        "--osmosis-policy=policy.py:policy",
    ],
}


def timed(argv: list[str], cwd: Path) -> float:
    env = {**os.environ, **BASE_ENV}
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stdout[-2000:]}")
    return elapsed


def plugin_imports(cwd: Path, top: int = 12) -> list[tuple[str, float]]:
    """(module, cumulative ms) of the plugin import, modules pytest itself does not load."""

    def importtime(code: str) -> dict[str, float]:
        proc = subprocess.run([OURS_PYTHON, "-X", "importtime", "-c", code], cwd=cwd,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        out: dict[str, float] = {}
        for line in proc.stderr.splitlines():
            if not line.startswith("import time:") or "|" not in line:
                continue
            _, cumulative, name = (part.strip() for part in line[12:].split("|"))
            if cumulative.isdigit():
                out[name.strip()] = int(cumulative) / 1000
        return out

    base = importtime("import pytest")
    with_plugin = importtime("import pytest, pytest_osmosis.plugin")
    extra = {m: ms for m, ms in with_plugin.items() if m not in base}
    roots = {m: ms for m, ms in extra.items() if "." not in m or m.startswith("pytest_osmosis")}
    return sorted(roots.items(), key=lambda kv: -kv[1])[:top]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    print(machine())
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    with tempfile.TemporaryDirectory(prefix="bench-cold-") as tmp:
        root = null_workspace(Path(tmp), 200)
        for argv in COMMANDS.values():  # warm the page cache once
            timed([OURS_PYTHON, *argv], root)
        for _ in range(args.repeats):
            for name, argv in COMMANDS.items():
                walls[name].append(timed([OURS_PYTHON, *argv], root))
        imports = plugin_imports(root)
    rows = [[name, f"{median(values) * 1000:.0f}"] for name, values in walls.items()]
    print(f"median of {args.repeats} fresh processes")
    print(table(["command", "wall ms"], rows))
    added = median(walls["pytest --help (plugin)"]) - median(walls["pytest --help -p no:osmosis"])
    print(f"the plugin adds {added * 1000:.0f} ms to pytest --help")
    print("plugin import, top-level modules pytest does not load (cumulative ms, -X importtime):")
    print(table(["module", "ms"], [[m, f"{ms:.1f}"] for m, ms in imports]))


if __name__ == "__main__":
    main()
