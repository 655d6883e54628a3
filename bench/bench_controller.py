"""One ``RolloutClient`` at high concurrency vs eight sharing the load (issue 16, target 2).

Our rollout server runs under uvicorn in a subprocess (``bench_server``'s server: a 10 ms
workflow and a grader over an unbounded ``LocalBackend``). This process drives it with
``--rollouts`` rollouts at each concurrency three ways: a single ``RolloutClient`` (which
shards its rollouts over httpx pools), a single client with every rollout in one pool (the
client before sharding), and eight clients sharing the load; interleaved, medians of
``--repeats``. Reported: rollouts/s, p50 latency, and the controller's own CPU per
rollout (this process's ``time.process_time``). The target: one client within 10% of
eight, i.e. ``one/eight >= 0.90``.

    .venv/bin/python bench/bench_controller.py [--rollouts 1000] [--repeats 3] [--concurrency 128]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import machine, median, table
from bench_server import SERVER, drive, start_server

from osmosis_rollout.controller import pools

EIGHT = 8
MODES = ("one client", "one client, one pool", "eight clients")
SHARD = pools.ROLLOUTS_PER_POOL


def run_once(url: str, rollouts: int, concurrency: int, mode: str, tag: str) -> dict[str, Any]:
    # "one pool" is the client before sharding: every rollout in one httpx pool.
    pools.ROLLOUTS_PER_POOL = 10**9 if mode == "one client, one pool" else SHARD  # type: ignore[misc]
    per_client = -(-concurrency // EIGHT) if mode == "eight clients" else 10**9
    cpu0 = time.process_time()
    result = asyncio.run(drive(url, rollouts, concurrency, tag, per_client))
    result["cpu_ms"] = 1000 * (time.process_time() - cpu0) / rollouts
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", default="128")
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    print(machine())
    results: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(textwrap.dedent(SERVER))
        proc, url = start_server("ours", script, Path(tmp) / "artifacts")
        try:
            run_once(url, 50, 16, MODES[0], "warm")
            for repeat in range(args.repeats):
                for conc in concurrencies:
                    for index, mode in enumerate(MODES):
                        tag = f"r{repeat}c{conc}m{index}"
                        run = run_once(url, args.rollouts, conc, mode, tag)
                        results[(conc, mode)].append(run)
                        print(
                            f"  run {repeat + 1}: c={conc:<4} {mode:22} "
                            f"{run['rate']:7.1f}/s p50 {run['p50'] * 1000:7.1f} ms "
                            f"controller cpu {run['cpu_ms']:.2f} ms/rollout",
                            file=sys.stderr,
                        )
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    rows = []
    for conc in concurrencies:
        eight = median([r["rate"] for r in results[(conc, "eight clients")]])
        for mode in MODES:
            runs = results[(conc, mode)]
            rate = median([r["rate"] for r in runs])
            rows.append(
                [
                    conc, mode, f"{rate:.1f}",
                    f"{1000 * median([r['p50'] for r in runs]):.1f}",
                    f"{median([r['cpu_ms'] for r in runs]):.2f}",
                    f"{rate / eight:.2f}",
                ]
            )  # fmt: skip
    print(f"{args.rollouts} rollouts per run (10 ms workflow + grader), median of {args.repeats}")
    print(
        table(
            ["conc", "controller", "rollouts/s", "p50 ms", "controller cpu ms/rollout", "vs eight"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
