"""RayBackend: throughput with 1, 2 and 4 actors, and Ray's dispatch cost per rollout.

Throughput: ``--rows`` rollouts (400) of a workflow that makes one chat call to a policy
answering after ``--latency-ms`` (500), graded against the label, all submitted at once to a
``RayBackend`` whose actors each take ``--per-actor`` (4) rollouts at a time. The capacity
is actors x per-actor slots, so the ideal wall time is ``ceil(rows / capacity) * latency``.

Overhead: ``--overhead-rows`` rollouts (400) of a null workflow (no model call, reward 1.0)
through ``LocalBackend`` in this process and through a 2-actor ``RayBackend``, counting CPU
time: this process's (``time.process_time``), and with Ray also every process of the
private local cluster it started (actors, raylet, GCS; read from ``/proc``).

Each configuration starts its own private local cluster (``address=None``, 4 logical CPUs,
no dashboard), or joins ``--address``.

    .venv/bin/python bench/bench_ray.py [--rows 400] [--latency-ms 500] [--per-actor 4]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import machine, table

from osmosis_rollout import ExecutionRequest, LocalBackend, RolloutContext, RolloutStatus
from osmosis_rollout.backend.ray import RayBackend
from osmosis_rollout.controller import PolicyServer

ROLLOUT = """
import httpx

from osmosis_rollout import AgentWorkflow, Grader
from osmosis_rollout.context import get_rollout_context


_client = None


class CallOnce(AgentWorkflow):
    async def run(self, ctx):
        global _client
        if (ctx.metadata or {}).get("null"):
            echo = ctx.prompt[-1]["content"].split()[-1]
            return [*ctx.prompt, {"role": "assistant", "content": echo}]
        rollout = get_rollout_context()
        if _client is None:  # one client per process: each rollout pays for a request only
            _client = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None))
        response = await _client.post(
            rollout.chat_completions_url + "/chat/completions",
            headers={"Authorization": f"Bearer {rollout.api_key}"},
            json={"model": "osmosis-rollout", "messages": ctx.prompt},
        )
        reply = response.json()["choices"][0]["message"]["content"]
        return [*ctx.prompt, {"role": "assistant", "content": reply}]


class LabelGrader(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.label in ctx.sample.messages[-1]["content"] else 0.0)
"""


def cluster_cpu_seconds(root_pid: int) -> float:
    """User+system CPU seconds of every live descendant of ``root_pid`` (Linux ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        times[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    total = 0.0
    for pid in times:
        ancestor = parents.get(pid)
        while ancestor and ancestor != root_pid:
            ancestor = parents.get(ancestor)
        if ancestor == root_pid:
            total += times[pid]
    return total


async def run_rows(backend: Any, server: PolicyServer, rows: int, *, null: bool) -> float:
    """Submit ``rows`` rollouts at once; return the wall seconds; check every reward."""

    async def one(i: int) -> float | None:
        rollout_id = f"r{i}-{time.monotonic_ns()}"
        ctx = RolloutContext(
            chat_completions_url=server.rollout_url(rollout_id),
            api_key=server.api_key,
            rollout_id=rollout_id,
            streaming=False,
        )
        request = ExecutionRequest(
            id=rollout_id,
            prompt=[{"role": "user", "content": f"say {i}"}],
            label=str(i),
            metadata={"null": True} if null else {},
        )
        with ctx:
            outcome = await backend.execute(request)
        result = outcome.result
        if result.status is not RolloutStatus.SUCCESS or result.sample is None:
            raise SystemExit(f"rollout {i} failed: {result}")
        return result.sample.reward

    started = time.perf_counter()
    rewards = await asyncio.gather(*(one(i) for i in range(rows)))
    wall = time.perf_counter() - started
    if rewards != [1.0] * rows:
        raise SystemExit("wrong rewards")
    return wall


def ray_backend(entry: Path, args: argparse.Namespace, actors: int, per_actor: int) -> RayBackend:
    return RayBackend(
        str(entry),
        address=args.address,
        actors=actors,
        max_concurrent=per_actor,
        num_cpus=1,
        local_num_cpus=4,
        log_to_driver=False,
        artifact_root=os.environ["_OSMOSIS_ROLLOUT_ARTIFACT_ROOT"],
    ).start()


def throughput(entry: Path, server: PolicyServer, args: argparse.Namespace) -> list[list[Any]]:
    rows: list[list[Any]] = []
    latency = args.latency_ms / 1000
    for actors in (1, 2, 4):
        backend = ray_backend(entry, args, actors, args.per_actor)
        try:
            asyncio.run(run_rows(backend, server, 8, null=False))  # warm the actors
            wall = asyncio.run(run_rows(backend, server, args.rows, null=False))
        finally:
            backend.close()
        ideal = math.ceil(args.rows / (actors * args.per_actor)) * latency
        rows.append([f"{actors}", actors * args.per_actor, wall, args.rows / wall, ideal])
        print(f"  {actors} actors: {wall:.2f} s", file=sys.stderr)
    return rows


def overhead(entry: Path, server: PolicyServer, args: argparse.Namespace) -> list[list[Any]]:
    n = args.overhead_rows
    sys.path.insert(0, str(entry.parent))
    local = LocalBackend(workflow="main:CallOnce", grader="main:LabelGrader")
    asyncio.run(run_rows(local, server, 20, null=True))
    cpu0 = time.process_time()
    wall = asyncio.run(run_rows(local, server, n, null=True))
    local_cpu = (time.process_time() - cpu0) / n * 1000
    results = [["LocalBackend (in this process)", local_cpu, "-", local_cpu, wall / n * 1000]]

    backend = ray_backend(entry, args, 2, 64)
    try:
        asyncio.run(run_rows(backend, server, 20, null=True))
        me = os.getpid()
        cpu0, cluster0 = time.process_time(), cluster_cpu_seconds(me)
        wall = asyncio.run(run_rows(backend, server, n, null=True))
        driver = (time.process_time() - cpu0) / n * 1000
        cluster = (cluster_cpu_seconds(me) - cluster0) / n * 1000
    finally:
        backend.close()
    label = "RayBackend, 2 actors" + (" (cluster CPU not counted)" if args.address else "")
    results.append([label, driver, cluster, driver + cluster, wall / n * 1000])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--latency-ms", type=float, default=500.0)
    parser.add_argument("--per-actor", type=int, default=4)
    parser.add_argument("--overhead-rows", type=int, default=400)
    parser.add_argument("--address", default=None, help="join this cluster instead")
    args = parser.parse_args()
    latency = args.latency_ms / 1000

    async def policy(request: Any) -> str:
        if "say" in str(request.messages[-1].get("content")):
            text = str(request.messages[-1]["content"]).split()[-1]
        else:
            text = "ok"
        await asyncio.sleep(latency)
        return text

    with tempfile.TemporaryDirectory() as tmp, PolicyServer(policy) as server:
        os.environ["_OSMOSIS_ROLLOUT_ARTIFACT_ROOT"] = str(Path(tmp) / "artifacts")
        entry = Path(tmp) / "rollout" / "main.py"
        entry.parent.mkdir()
        entry.write_text(ROLLOUT)
        print(machine())
        scale = throughput(entry, server, args)
        print(
            f"\n{args.rows} rollouts, policy latency {args.latency_ms:g} ms, "
            f"{args.per_actor} rollouts per actor"
        )
        print(table(["actors", "slots", "wall s", "rollouts/s", "ideal s"], scale))
        cost = overhead(entry, server, args)
        print(f"\n{args.overhead_rows} null rollouts (no model call), CPU ms per rollout")
        print(table(["backend", "this process", "cluster", "total", "wall ms/rollout"], cost))


if __name__ == "__main__":
    main()
