"""Memory growth: peak RSS of a plugin run at 200 vs 2,000 rows.

The null rollout (returns its prompt plus a ``--payload``-byte assistant message, so each
row's sample, trajectory and report entry weigh something), a trivial grader, the plugin
at its default concurrency, writing trajectories and its report under ``--osmosis-output``.
Peak RSS is the pytest process's ``ru_maxrss``. If results piled up in memory instead of
streaming to disk, 10x the rows would show as growth well past the fixed cost.
Medians of ``--repeats`` runs, interleaved.

    .venv/bin/python bench/bench_memory.py [--small 200] [--large 2000] [--payload 4096] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import OURS_PYTHON, machine, median, null_workspace, run_child, table


def run(root: Path, rows: int, payload: int) -> dict[str, float]:
    argv = [OURS_PYTHON, "pytest_rusage.py", "-q", "-p", "no:cacheprovider",
            f"--osmosis-dataset=data/rows{rows}.jsonl", "--osmosis-policy=policy.py:policy",
            f"--osmosis-output=out/{rows}"]  # fmt: skip
    env = {"BENCH_PAYLOAD": str(payload), "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(root / "art")}
    report = run_child(argv, cwd=root, env=env)
    if report["rc"] != 0:
        raise SystemExit(f"plugin with {rows} rows exited {report['rc']}")
    return report


def scaling(sizes: list[int], payload: int, repeats: int) -> None:
    """Peak RSS and wall per row at each size (issue 16, target 5: 1k/5k/10k)."""
    runs: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        root = Path(tmp)
        for rows in sizes:
            null_workspace(root, rows)
        for _ in range(repeats):
            for rows in sizes:
                runs[rows].append(run(root, rows, payload))
    base = median([r["maxrss_kb"] for r in runs[sizes[0]]]) / 1024
    table_rows = []
    for rows in sizes:
        rss = median([r["maxrss_kb"] for r in runs[rows]]) / 1024
        wall = median([r["wall"] for r in runs[rows]])
        table_rows.append(
            [rows, f"{rss:.1f}", f"{rss / base:.3f}", f"{wall:.2f}", f"{1000 * wall / rows:.3f}"]
        )
    print(f"median of {repeats}; payload {payload} B per row")
    print(table(["rows", "peak RSS MB", f"vs {sizes[0]}", "wall s", "ms/row"], table_rows))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=2000)
    parser.add_argument("--payload", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--sizes", help="comma-separated row counts: one table of RSS and wall per row count"
    )
    args = parser.parse_args()
    print(machine())
    if args.sizes:
        scaling([int(n) for n in args.sizes.split(",")], args.payload, args.repeats)
        return
    rss: dict[int, list[float]] = {args.small: [], args.large: []}
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        root = Path(tmp)
        for rows in rss:
            null_workspace(root, rows)
        for _ in range(args.repeats):
            for rows in rss:
                rss[rows].append(run(root, rows, args.payload)["maxrss_kb"] / 1024)
    small, large = median(rss[args.small]), median(rss[args.large])
    print(f"median of {args.repeats}; payload {args.payload} B per row")
    print(
        table(["rows", "peak RSS MB"], [[args.small, f"{small:.1f}"], [args.large, f"{large:.1f}"]])
    )
    print(f"RSS at {args.large} rows = {large / small:.3f}x RSS at {args.small} rows")


if __name__ == "__main__":
    main()
