"""Harness overhead per row: the plugin over a null rollout vs a plain parametrized test.

- plugin: ``pytest --osmosis-dataset rowsN.jsonl --osmosis-policy policy.py:policy`` over a
  workflow that returns its prompt and a grader that rewards 1.0 (no model call), at the
  plugin's default concurrency;
- parametrize: ``@pytest.mark.parametrize("i", range(N))`` over a no-op test.

Per-row overhead = (wall(N rows) - wall(1 row)) / (N - 1), so interpreter and plugin
start-up cancel out; both run pytest in-process under the same runner script
(``-p no:cacheprovider -q``). Medians of ``--repeats`` runs, interleaved. The same
difference of the process's CPU time (all threads) is printed beside it: on a machine
shared with other work, wall time also counts the waits for a core, CPU time much less.

    .venv/bin/python bench/bench_overhead.py [--rows 2000] [--repeats 3] [--base DIR] [--dir /dev/shm]

``--base DIR`` (a source tree of another revision, e.g. ``git archive REV osmosis_rollout
pytest_osmosis | tar -x -C DIR``) adds the plugin run with ``DIR`` first on ``PYTHONPATH``,
interleaved with the others, so a change is measured under the same load as its baseline.

``--dir /dev/shm`` puts the workspaces, outputs and rollout directories on tmpfs: what the
harness itself costs, without the disk (on a shared VM the same file calls cost 0.08 to
0.7 ms per row from one hour to the next).

The last line is the floor the spec sets: the CPU time of just the file-system calls each
rollout makes (its directory, ``artifacts/``, the writability marker, the trajectory's
temporary file and its rename: ``spec/protocol.md`` II.3.7), made on the same disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import OURS_PYTHON, machine, median, null_workspace, run_child, table

PARAM_TEST = """
import os
import pytest

N = int(os.environ["BENCH_ROWS"])


@pytest.mark.parametrize("i", range(N))
def test_noop(i):
    pass
"""


def run(root: Path, kind: str, rows: int, base: Path | None = None) -> tuple[float, float]:
    """One run's (wall, CPU) seconds."""
    if kind.startswith("plugin"):
        argv = [OURS_PYTHON, "pytest_rusage.py", "-q", "-p", "no:cacheprovider",
                f"--osmosis-dataset=data/rows{rows}.jsonl", "--osmosis-policy=policy.py:policy",
                f"--osmosis-output=out/{rows}"]  # fmt: skip
        env = {"_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(root / "artifacts")}
        shutil.rmtree(root / "out" / str(rows), ignore_errors=True)  # a run replaces no earlier run
        if kind == "plugin (base)" and base is not None:
            env["PYTHONPATH"] = str(base)
    else:
        argv = [OURS_PYTHON, "pytest_rusage.py", "-q", "-p", "no:cacheprovider",
                "param/test_param.py"]  # fmt: skip
        env = {"BENCH_ROWS": str(rows)}
    report = run_child(argv, cwd=root, env=env)
    if report["rc"] != 0:
        raise SystemExit(f"{kind} with {rows} rows exited {report['rc']}")
    return float(report["wall"]), float(report["cpu"])


def file_floor(root: Path, rows: int) -> tuple[float, float]:
    """(wall, CPU) seconds per row of the per-rollout files alone, written ``rows`` times."""
    base = root / "floor"
    base.mkdir()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    wall0, cpu0 = time.perf_counter(), time.process_time()
    for i in range(rows):
        rollout = base / f"row-{i}.0.0123abcd"
        rollout.mkdir()
        (rollout / "artifacts").mkdir()
        fd = os.open(rollout / ".osmosis-health-check", flags, 0o666)
        os.write(fd, b"ok\n")
        os.close(fd)
        tmp = rollout / f".trajectory.json.{os.getpid()}.{i}.tmp"
        fd = os.open(tmp, flags, 0o666)
        os.write(fd, b"{}\n" * 200)
        os.close(fd)
        os.replace(tmp, rollout / "trajectory.json")
    return (time.perf_counter() - wall0) / rows, (time.process_time() - cpu0) / rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--base", type=Path, help="another source tree to run beside this one")
    parser.add_argument(
        "--dir",
        type=Path,
        help="where the workspaces and outputs go (default: the system temp dir); e.g. "
        "/dev/shm to measure the harness without the disk",
    )
    args = parser.parse_args()
    kinds = (
        ("plugin", "parametrize")
        if args.base is None
        else ("plugin", "plugin (base)", "parametrize")
    )
    print(machine())
    walls: dict[tuple[str, int], list[float]] = {}
    cpus: dict[tuple[str, int], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-overhead-", dir=args.dir) as tmp:
        root = Path(tmp)
        null_workspace(root, 1)
        null_workspace(root, args.rows)
        (root / "param").mkdir()
        (root / "param" / "test_param.py").write_text(PARAM_TEST)
        for _ in range(args.repeats):
            for kind in kinds:
                for rows in (1, args.rows):
                    wall, cpu = run(root, kind, rows, args.base.resolve() if args.base else None)
                    walls.setdefault((kind, rows), []).append(wall)
                    cpus.setdefault((kind, rows), []).append(cpu)
    out = []
    per_row: dict[str, float] = {}
    cpu_per_row: dict[str, float] = {}
    for kind in kinds:
        one, many = median(walls[(kind, 1)]), median(walls[(kind, args.rows)])
        per_row[kind] = (many - one) / (args.rows - 1)
        cpu_one, cpu_many = median(cpus[(kind, 1)]), median(cpus[(kind, args.rows)])
        cpu_per_row[kind] = (cpu_many - cpu_one) / (args.rows - 1)
        out.append(
            [kind, f"{one:.2f}", f"{many:.2f}", f"{per_row[kind] * 1000:.3f}",
             f"{cpu_one:.2f}", f"{cpu_many:.2f}", f"{cpu_per_row[kind] * 1000:.3f}"]
        )  # fmt: skip
    print(f"median of {args.repeats}; wall = pytest.main() in-process, after interpreter start;")
    print("cpu = the process's user+system time, all threads, start-up included")
    print(
        table(
            ["kind", "1 row s", f"{args.rows} rows s", "per-row ms",
             "cpu 1 row s", f"cpu {args.rows} s", "cpu/row ms"],
            out,
        )
    )  # fmt: skip
    print(f"plugin per-row overhead = {per_row['plugin'] / per_row['parametrize']:.2f}x "
          "a plain parametrized test (wall), "
          f"{cpu_per_row['plugin'] / cpu_per_row['parametrize']:.2f}x (cpu)")  # fmt: skip
    if args.base is not None:
        print(
            f"base plugin: {per_row['plugin (base)'] / per_row['parametrize']:.2f}x (wall), "
            f"{cpu_per_row['plugin (base)'] / cpu_per_row['parametrize']:.2f}x (cpu)"
        )
    with tempfile.TemporaryDirectory(prefix="bench-overhead-", dir=args.dir) as tmp:
        floor_wall, floor_cpu = file_floor(Path(tmp), args.rows)
    print(
        f"per-rollout files alone (2 mkdir, 2 file creations, 1 rename): "
        f"{floor_wall * 1000:.3f} ms wall, {floor_cpu * 1000:.3f} ms CPU per row "
        f"= {floor_cpu / cpu_per_row['parametrize']:.2f}x a parametrized test's CPU"
    )
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
