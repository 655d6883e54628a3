"""Rollout server throughput: our ``create_rollout_server`` vs the official one (0.3.8).

Each server runs under uvicorn in its own subprocess (ours on this venv's Python, the
official one in ``bench/.cache/official-venv``, Python 3.12) over its own ``LocalBackend``
(unbounded slots) with the same trivial workflow (sleeps 10 ms, answers) and grader. The
same controller drives both: our ``RolloutClient`` in this process, ``--rollouts``
rollouts at concurrency 32 and 128 (a semaphore around admission + long poll), spread over
one client per ``--per-client`` (16) in-flight rollouts: httpcore's pool scans every
connection on each request, so one client holding 128 long polls spends more CPU in its
pool than the servers spend in total (see RESULTS.md); ``--per-client 0`` shows that. Reported:
rollouts/s, p50/p99 latency from just before admission to the terminal result, and the
server process's CPU per rollout (``/proc/<pid>/stat``). Servers and concurrencies are
interleaved; medians of ``--repeats`` runs. ``--servers ours,serve,official`` adds
``serve``: our server as ``osmosis-rollout serve`` runs it (``run_rollout_app``: the
connection guard, ``--max-concurrent auto``).

    .venv/bin/python bench/bench_server.py [--rollouts 1000] [--repeats 3] [--concurrency 32,128]
        [--servers ours,official]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import BASE_ENV, OURS_PYTHON, machine, median, official_python, table

from osmosis_rollout.controller import RolloutClient

SERVER = """
import asyncio, sys
import uvicorn
if sys.argv[1] == "official":
    from osmosis_ai.rollout import (AgentWorkflow, AgentWorkflowConfig, ConcurrencyConfig,
                                    Grader, LocalBackend)
    from osmosis_ai.rollout.server import create_rollout_server
else:
    from osmosis_rollout import (AgentWorkflow, AgentWorkflowConfig, ConcurrencyConfig,
                                 Grader, LocalBackend)
    from osmosis_rollout.server import create_rollout_server


class Work(AgentWorkflow):
    async def run(self, ctx):
        await asyncio.sleep(0.01)
        return [*ctx.prompt, {"role": "assistant", "content": "42"}]


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)


backend = LocalBackend(workflow=Work, grader=Exact,
                       workflow_config=AgentWorkflowConfig(name="bench",
                                                           concurrency=ConcurrencyConfig()))
if sys.argv[1] == "serve":
    from osmosis_rollout.server.runner import run_rollout_app
    app = create_rollout_server(backend=backend, configure_logging=False, max_concurrent="auto")
    run_rollout_app(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
                    drain_timeout_sec=0)
else:
    app = create_rollout_server(backend=backend, configure_logging=False)
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
                access_log=False, timeout_keep_alive=60, backlog=4096)
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(
    which: str,
    script: Path,
    artifacts: Path,
    *,
    extra_args: list[str] | None = None,
    variant: str = "openai",
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    python = official_python(variant) if which == "official" else OURS_PYTHON
    env = {**os.environ, **BASE_ENV, "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(artifacts)}
    proc = subprocess.Popen(
        [python, str(script), which, str(port), *(extra_args or [])],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{which} server died: {proc.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"{which} server did not start")


async def drive(
    url: str,
    rollouts: int,
    concurrency: int,
    tag: str,
    per_client: int,
    *,
    chat_url: str = "http://127.0.0.1:9/v1",
) -> dict[str, Any]:
    latencies: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    clients = [RolloutClient(url) for _ in range(max(1, -(-concurrency // per_client)))]
    try:

        async def one(i: int) -> None:
            client = clients[i % len(clients)]
            async with gate:
                start = time.perf_counter()
                handle = await client.run_rollout_async(
                    initial_messages=[{"role": "user", "content": "6*7"}],
                    chat_completions_url=chat_url,
                    llm_api_key="bench-key",
                    rollout_id=f"{tag}-{i}",
                    label="42",
                )
                result = await handle
                latencies.append(time.perf_counter() - start)
                if (
                    result.status != "success"
                    or result.sample is None
                    or result.sample.reward != 1.0
                ):
                    raise SystemExit(f"rollout {tag}-{i} did not succeed: {result}")

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(rollouts)))
        wall = time.perf_counter() - start
    finally:
        for client in clients:
            await client.aclose()
    latencies.sort()
    return {
        "rate": rollouts / wall,
        "p50": latencies[len(latencies) // 2],
        "p99": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", default="32,128")
    parser.add_argument(
        "--per-client",
        type=int,
        default=16,
        help="in-flight rollouts per RolloutClient (httpx pool); 0 = one client for all",
    )
    parser.add_argument("--servers", default="ours,official")
    args = parser.parse_args()
    servers = args.servers.split(",")
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    per_client = args.per_client or 10**9
    print(machine())
    results: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(textwrap.dedent(SERVER))
        for repeat in range(args.repeats):
            for which in servers:
                proc, url = start_server(which, script, Path(tmp) / which)
                try:
                    # Warm-up: first-request costs (imports, pydantic schemas) off the clock.
                    asyncio.run(drive(url, 20, 8, f"warm{repeat}", per_client))
                    for conc in concurrencies:
                        cpu0 = proc_cpu(proc.pid)
                        run = asyncio.run(
                            drive(url, args.rollouts, conc, f"r{repeat}c{conc}", per_client)
                        )
                        run["server_cpu_ms"] = 1000 * (proc_cpu(proc.pid) - cpu0) / args.rollouts
                        results[(which, conc)].append(run)
                        print(
                            f"  run {repeat + 1}: {which:8} c={conc:<4} {run['rate']:7.1f}/s "
                            f"p50 {run['p50'] * 1000:6.1f} ms p99 {run['p99'] * 1000:6.1f} ms",
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
        official_rate = median([r["rate"] for r in results[("official", conc)]])
        for which in servers:
            runs = results[(which, conc)]
            rate = median([r["rate"] for r in runs])
            rows.append(
                [
                    which, conc, f"{rate:.1f}",
                    f"{1000 * median([r['p50'] for r in runs]):.1f}",
                    f"{1000 * median([r['p99'] for r in runs]):.1f}",
                    f"{median([r['server_cpu_ms'] for r in runs]):.2f}",
                    f"{rate / official_rate:.2f}",
                ]
            )  # fmt: skip
    print(f"{args.rollouts} rollouts per run (10 ms workflow + grader), median of {args.repeats}")
    print(
        table(
            [
                "server",
                "conc",
                "rollouts/s",
                "p50 ms",
                "p99 ms",
                "server cpu ms/rollout",
                "vs official",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
