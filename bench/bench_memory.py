"""Memory growth: peak RSS of a plugin run at 200 vs 2,000 rows.

The null rollout (returns its prompt plus a ``--payload``-byte assistant message, so each
row's sample, trajectory and report entry weigh something), a trivial grader, the plugin
at its default concurrency, writing trajectories and its report under ``--osmosis-output``.
Peak RSS is the pytest process's ``ru_maxrss``. If results piled up in memory instead of
streaming to disk, 10x the rows would show as growth well past the fixed cost.
Medians of ``--repeats`` runs, interleaved.

``--sizes 1000,5000,10000`` prints one table of peak RSS and wall per row count instead;
with ``--plain``, beside a plain parametrized test of the same number of items (pytest's
own per-item cost, the floor any plugin that makes one item per row sits on).

``--end 10000`` runs that many rows with ``--osmosis-html`` and ``--osmosis-baseline`` (the
baseline an earlier run of the same rows, not measured) beside a run with neither: peak RSS,
wall, and how many times the run opened its journal to read it (an audit hook in the
workspace's conftest counts them; issue 33: once).

    .venv/bin/python bench/bench_memory.py [--small 200] [--large 2000] [--payload 4096] [--repeats 3]
    .venv/bin/python bench/bench_memory.py --sizes 1000,5000,10000 [--plain] [--repeats 3]
    .venv/bin/python bench/bench_memory.py --end 10000 [--payload 4096] [--repeats 1]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import OURS_PYTHON, machine, median, null_workspace, run_child, table


def run(root: Path, rows: int, payload: int, *extra: str, out: str = "") -> dict[str, float]:
    argv = [OURS_PYTHON, "pytest_rusage.py", "-q", "-p", "no:cacheprovider",
            f"--osmosis-dataset=data/rows{rows}.jsonl", "--osmosis-policy=policy.py:policy",
            f"--osmosis-output=out/{out or rows}", *extra]  # fmt: skip
    env = {"BENCH_PAYLOAD": str(payload), "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(root / "art")}
    # A run replaces no earlier run: the plugin refuses an existing run folder (exit 4).
    shutil.rmtree(root / "out" / (out or str(rows)), ignore_errors=True)
    (root / "out" / "report.html").unlink(missing_ok=True)
    report = run_child(argv, cwd=root, env=env)
    if report["rc"] != 0:
        raise SystemExit(f"plugin with {rows} rows {' '.join(extra)} exited {report['rc']}")
    return report


PLAIN_TEST = """
import os

import pytest


@pytest.mark.parametrize("i", range(int(os.environ["BENCH_ROWS"])))
def test_plain(i):
    assert i >= 0
"""


def run_plain(root: Path, rows: int) -> dict[str, float]:
    argv = [OURS_PYTHON, "pytest_rusage.py", "-q", "-p", "no:cacheprovider", "plain"]
    report = run_child(argv, cwd=root, env={"BENCH_ROWS": str(rows)})
    if report["rc"] != 0:
        raise SystemExit(f"plain test with {rows} items exited {report['rc']}")
    return report


JOURNAL_READS = """
import os
import sys

_reads = []


def _audit(event, args):
    if event == "open" and str(args[0]).endswith("rows.jsonl"):
        mode, flags = args[1], args[2]
        if ("r" in mode and "+" not in mode) if mode else flags & 3 == os.O_RDONLY:
            _reads.append(1)


sys.addaudithook(_audit)


def pytest_unconfigure(config):
    with open("journal_reads.txt", "w") as handle:
        handle.write(str(len(_reads)))
"""


def end_of_run(rows: int, payload: int, repeats: int) -> None:
    """A run's end at ``rows`` rows: with the HTML report and a baseline, and without."""
    results: dict[str, list[dict[str, float]]] = {"report only": [], "+ html + baseline": []}
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        root = Path(tmp)
        null_workspace(root, rows)
        (root / "conftest.py").write_text(JOURNAL_READS)
        run(root, rows, payload, out="base")
        for i in range(repeats):
            for name, extra in (
                ("report only", ()),
                ("+ html + baseline", ("--osmosis-html=out/report.html",
                                       "--osmosis-baseline=out/base/report.json")),
            ):  # fmt: skip
                result = run(root, rows, payload, *extra, out=f"run{i}")
                result["reads"] = float((root / "journal_reads.txt").read_text())
                result["report_mb"] = (
                    root / "out" / f"run{i}" / "report.json"
                ).stat().st_size / 2**20
                journal = root / "out" / f"run{i}" / "rows.jsonl"
                result["journal_mb"] = journal.stat().st_size / 2**20
                results[name].append(result)
    print(
        f"{rows} rows, payload {payload} B per row (answers clipped to 1000 chars); median of {repeats}"
    )
    print(
        table(
            ["run", "peak RSS MB", "wall s", "journal reads", "rows.jsonl MB", "report.json MB"],
            [
                [
                    name,
                    f"{median([r['maxrss_kb'] for r in runs]) / 1024:.1f}",
                    f"{median([r['wall'] for r in runs]):.1f}",
                    f"{median([r['reads'] for r in runs]):.0f}",
                    f"{median([r['journal_mb'] for r in runs]):.1f}",
                    f"{median([r['report_mb'] for r in runs]):.1f}",
                ]
                for name, runs in results.items()
            ],
        )
    )


def scaling(sizes: list[int], payload: int, repeats: int, plain: bool) -> None:
    """Peak RSS and wall per row at each size (issue 16, target 5: 1k/5k/10k)."""
    runs: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    plains: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        root = Path(tmp)
        for rows in sizes:
            null_workspace(root, rows)
        (root / "plain").mkdir()
        (root / "plain" / "test_plain.py").write_text(PLAIN_TEST)
        for _ in range(repeats):
            for rows in sizes:
                runs[rows].append(run(root, rows, payload))
                if plain:
                    plains[rows].append(run_plain(root, rows))
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
    if not plain:
        return
    plain_base = median([r["maxrss_kb"] for r in plains[sizes[0]]]) / 1024
    table_rows = []
    for rows in sizes:
        rss = median([r["maxrss_kb"] for r in runs[rows]]) / 1024
        floor = median([r["maxrss_kb"] for r in plains[rows]]) / 1024
        table_rows.append(
            [rows, f"{rss:.1f}", f"{floor:.1f}", f"{floor / plain_base:.3f}", f"{rss - floor:.1f}"]
        )
    print("\nbeside a plain parametrized test of as many items (pytest's own cost)")
    print(
        table(
            ["rows", "plugin MB", "plain MB", f"plain vs {sizes[0]}", "plugin - plain MB"],
            table_rows,
        )
    )
    lo, hi = sizes[0], sizes[-1]
    per_row = [
        (
            median([r["maxrss_kb"] for r in source[hi]])
            - median([r["maxrss_kb"] for r in source[lo]])
        )
        * 1024
        / (hi - lo)
        for source in (runs, plains)
    ]
    print(
        f"per extra row ({lo} -> {hi}): plugin {per_row[0] / 1024:.1f} KB, "
        f"plain {per_row[1] / 1024:.1f} KB"
    )


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
    parser.add_argument(
        "--plain",
        action="store_true",
        help="with --sizes: also a plain parametrized test of as many items (pytest's floor)",
    )
    parser.add_argument(
        "--end", type=int, help="rows of a run with --osmosis-html and --osmosis-baseline"
    )
    args = parser.parse_args()
    print(machine())
    if args.end:
        end_of_run(args.end, args.payload, args.repeats)
        return
    if args.sizes:
        scaling([int(n) for n in args.sizes.split(",")], args.payload, args.repeats, args.plain)
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
