"""One ``RolloutClient`` at high concurrency vs eight sharing the load (issue 16, target 2).

Our rollout server runs under uvicorn in a subprocess (``bench_server``'s server: a 10 ms
workflow and a grader over an unbounded ``LocalBackend``). This process drives it with
``--rollouts`` rollouts at each concurrency, once through a single ``RolloutClient`` and
once through eight clients (one per 16 rollouts in flight at c=128), interleaved, medians
of ``--repeats``. Reported: rollouts/s, p50 latency, and the controller's own CPU per
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

EIGHT = 8


def run_once(url: str, rollouts: int, concurrency: int, clients: int, tag: str) -> dict[str, Any]:
    per_client = 10**9 if clients == 1 else -(-concurrency // clients)
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
    results: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(textwrap.dedent(SERVER))
        proc, url = start_server("ours", script, Path(tmp) / "artifacts")
        try:
            run_once(url, 50, 16, 1, "warm")
            for repeat in range(args.repeats):
                for conc in concurrencies:
                    for clients in (1, EIGHT):
                        run = run_once(
                            url, args.rollouts, conc, clients, f"r{repeat}c{conc}n{clients}"
                        )
                        results[(conc, clients)].append(run)
                        print(
                            f"  run {repeat + 1}: c={conc:<4} clients={clients} "
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
        eight = median([r["rate"] for r in results[(conc, EIGHT)]])
        for clients in (1, EIGHT):
            runs = results[(conc, clients)]
            rate = median([r["rate"] for r in runs])
            rows.append(
                [
                    conc, clients, f"{rate:.1f}",
                    f"{1000 * median([r['p50'] for r in runs]):.1f}",
                    f"{median([r['cpu_ms'] for r in runs]):.2f}",
                    f"{rate / eight:.2f}",
                ]
            )  # fmt: skip
    print(f"{args.rollouts} rollouts per run (10 ms workflow + grader), median of {args.repeats}")
    print(
        table(
            ["conc", "clients", "rollouts/s", "p50 ms", "controller cpu ms/rollout", "vs eight"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
