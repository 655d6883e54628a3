"""First result fast: how long after the first rollout starts does the demo's first row finish?

Runs the command ``scripts/demo.sh`` runs (the multiply-openai example, 8 rows, its instant
deterministic policy) in fresh processes and reads the run's ``rows.jsonl``:

- first result = min(started_at + duration) - min(started_at) over the rows (the clock
  starts with the first rollout: imports and start-up come before it);
- row median = the median row duration; rows wall = last end - first start.

With ``--base DIR`` (a source tree of another revision, e.g. ``git archive main | tar -x``),
the same command also runs with ``DIR`` first on ``PYTHONPATH``, interleaved, so before and
after are measured side by side under the same load.

    .venv/bin/python bench/bench_first_result.py [--repeats 5] [--base /tmp/base-tree]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "example_rollouts" / "multiply-openai"


def run_demo(output: Path, base: Path | None) -> dict[str, float]:
    """Run the demo once into ``output``; return its first-result figures (seconds)."""
    env = dict(os.environ)
    # Bytecode caching on, as on a developer machine (this workplace turns it off).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if base is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(base), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:asyncio",
         "--osmosis-dataset", "data/test.jsonl",
         "--osmosis-policy", "rollouts/multiply-openai/policy.py:policy",
         f"--osmosis-output={output}", "-q"],
        cwd=EXAMPLE, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"demo failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    rows = [json.loads(line) for line in (output / "rows.jsonl").read_text().splitlines()]
    starts = [float(row["started_at"]) for row in rows]
    ends = [s + float(row["duration_ms"]) / 1000 for s, row in zip(starts, rows, strict=True)]
    return {
        "first": min(ends) - min(starts),
        "median": statistics.median(float(row["duration_ms"]) / 1000 for row in rows),
        "wall": max(ends) - min(starts),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--base", type=Path, help="another source tree to run beside this one")
    args = parser.parse_args()
    trees: dict[str, Path | None] = {"this tree": None}
    if args.base is not None:
        trees = {"base": args.base.resolve(), **trees}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="bench-first-") as tmp:
        run_demo(Path(tmp) / "warm-up", None)  # bytecode caches
        for i in range(args.repeats):
            for name, base in trees.items():
                runs[name].append(run_demo(Path(tmp) / f"{name}-{i}".replace(" ", "-"), base))
    load = os.getloadavg()
    print(f"demo (multiply-openai, 8 rows, instant scripted policy), median of {args.repeats}")
    print(f"load average at the end: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    print(
        f"{'tree':<12}{'first result s':>16}{'row median s':>14}{'rows wall s':>13}  runs (first)"
    )
    for name, results in runs.items():
        firsts = ", ".join(f"{r['first']:.3f}" for r in results)
        print(
            f"{name:<12}{statistics.median(r['first'] for r in results):>16.3f}"
            f"{statistics.median(r['median'] for r in results):>14.3f}"
            f"{statistics.median(r['wall'] for r in results):>13.3f}  {firsts}"
        )


if __name__ == "__main__":
    main()
