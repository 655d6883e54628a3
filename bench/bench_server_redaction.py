"""Served throughput with the redaction of issue 34 (split writes, encoded keys) vs before.

The same served app from two trees, side by side in one run: ``before`` (``--before-rev``,
default the merge base with ``main``, extracted with ``git archive``) and ``after`` (this
checkout). Each server is ``run_rollout_app`` over ``create_rollout_server`` (logging and
redaction on, as ``osmosis-rollout serve`` runs it; its output to /dev/null) with a workflow
that prints three lines holding its rollout's key (one in two writes) and logs one, then
answers; every rollout has its own ``llm_api_key``. Our ``RolloutClient`` drives
``--rollouts`` at concurrency 32; trees alternate, ``--repeats`` times. Reported: rollouts/s
and the server's CPU per rollout (medians), and after/before. First, in this process, each
tree's ``redaction.py`` alone: CPU per line redacted, per line through the redacting
stream, and per rollout key (held, released, retired), which the served numbers contain.

    .venv/bin/python bench/bench_server_redaction.py [--rollouts 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import io
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import BASE_ENV, OURS_PYTHON, REPO, machine, median, table
from bench_server import free_port, proc_cpu

from osmosis_rollout.controller import RolloutClient

SERVER = """
import asyncio, logging, sys
from osmosis_rollout import AgentWorkflow, Grader, LocalBackend, get_rollout_context
from osmosis_rollout.server import create_rollout_server
from osmosis_rollout.server.runner import run_rollout_app

log = logging.getLogger("bench.workflow")


class Chatty(AgentWorkflow):
    async def run(self, ctx):
        key = get_rollout_context().api_key
        print("calling the model with", key)
        print("split:", key[:6], end="", flush=True)
        await asyncio.sleep(0.005)
        print(key[6:])
        log.info("model answered for %s", key)
        await asyncio.sleep(0.005)
        print("done")
        return [*ctx.prompt, {"role": "assistant", "content": "42"}]


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)


app = create_rollout_server(backend=LocalBackend(workflow=Chatty, grader=Exact),
                            max_concurrent=256)
run_rollout_app(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning",
                drain_timeout_sec=0)
"""
CONCURRENCY = 32


LINES = [
    "calling the model with {key}\n",
    "split: {key}\n",
    "done\n",
    "2026-12-07 09:13:01,123 INFO bench.workflow: model answered for {key}\n",
    'INFO:     127.0.0.1:37484 - "POST /rollout HTTP/1.1" 202 Accepted\n',
]


def redaction_costs(module_path: Path, name: str) -> list[str]:
    """Microseconds per line redacted, per line written through the stream, per key."""
    spec = importlib.util.spec_from_file_location(name, module_path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    redactor = module.LiveRedactor()
    redactor.retained = 64  # so that keys are retired (unindexed) within the loop
    keys = 20000
    cpu = time.process_time()
    for i in range(keys):
        key = f"rk-r1-{i:06d}-0123456789abcdef"
        redactor.hold("POLICY_API_KEY", key)
        redactor.release(key)
    per_key = (time.process_time() - cpu) / keys
    held = [f"rk-r2-{i:06d}-0123456789abcdef" for i in range(32)]
    for key in held:
        redactor.hold("POLICY_API_KEY", key)
    lines = [line.format(key=key) for key in held for line in LINES]
    cpu = time.process_time()
    for _ in range(100):
        for line in lines:
            redactor.redact(line)
    per_line = (time.process_time() - cpu) / (100 * len(lines))
    stream = module.RedactingStream(io.StringIO(), redactor)

    async def through_the_stream() -> float:
        cpu = time.process_time()
        for _ in range(100):
            for line in lines:
                stream.write(line)
        return (time.process_time() - cpu) / (100 * len(lines))

    per_write = asyncio.run(through_the_stream())
    return [f"{1e6 * per_line:.2f}", f"{1e6 * per_write:.2f}", f"{1e6 * per_key:.1f}"]


def start(tree: Path, script: Path, artifacts: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        **BASE_ENV,
        "PYTHONPATH": str(tree),
        "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(artifacts),
    }
    proc = subprocess.Popen(
        [OURS_PYTHON, str(script), str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the server of {tree} did not start")


async def drive(url: str, rollouts: int, tag: str) -> float:
    gate = asyncio.Semaphore(CONCURRENCY)
    clients = [RolloutClient(url) for _ in range(CONCURRENCY // 16)]
    try:

        async def one(i: int) -> None:
            async with gate:
                handle = await clients[i % len(clients)].run_rollout_async(
                    initial_messages=[{"role": "user", "content": "6*7"}],
                    chat_completions_url="http://127.0.0.1:9/v1",
                    llm_api_key=f"rk-{tag}-{i:06d}-0123456789abcdef",
                    rollout_id=f"{tag}-{i}",
                    label="42",
                )
                result = await handle
                if result.status != "success":
                    raise SystemExit(f"rollout {tag}-{i} did not succeed: {result}")

        start = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(rollouts)))
        return rollouts / (time.perf_counter() - start)
    finally:
        for client in clients:
            await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before-rev", default=None, help="default: merge base with main")
    args = parser.parse_args()
    rev = (
        args.before_rev
        or subprocess.check_output(
            ["git", "merge-base", "HEAD", "main"], cwd=REPO, text=True
        ).strip()
    )
    print(machine())
    print(f"before: {rev[:12]}; after: {REPO} (working tree)")
    rates: dict[str, list[float]] = defaultdict(list)
    cpus: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-redaction-") as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        archive = subprocess.run(
            ["git", "archive", rev, "osmosis_rollout"], cwd=REPO, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
        script = Path(tmp) / "server.py"
        script.write_text(textwrap.dedent(SERVER))
        trees = {"before": before, "after": REPO}
        costs = [
            [name, *redaction_costs(tree / "osmosis_rollout" / "redaction.py", f"r_{name}")]
            for name, tree in trees.items()
        ]
        print(table(["tree", "us/line redacted", "us/line via stream", "us/key"], costs))
        for repeat in range(args.repeats):
            order = list(trees) if repeat % 2 == 0 else list(reversed(trees))
            for name in order:
                proc, url = start(trees[name], script, Path(tmp) / name)
                try:
                    asyncio.run(drive(url, 200, f"warm{repeat}"))
                    cpu = proc_cpu(proc.pid)
                    rate = asyncio.run(drive(url, args.rollouts, f"r{repeat}"))
                    cpus[name].append(1e3 * (proc_cpu(proc.pid) - cpu) / args.rollouts)
                    rates[name].append(rate)
                finally:
                    proc.terminate()
                    proc.wait(timeout=30)
                print(f"  repeat {repeat + 1} {name}: {rates[name][-1]:.0f} rollouts/s", flush=True)
    rows = [[name, f"{median(rates[name]):.0f}", f"{median(cpus[name]):.2f}"] for name in trees]
    rows.append(
        [
            "after/before",
            f"{median(rates['after']) / median(rates['before']):.3f}",
            f"{median(cpus['after']) / median(cpus['before']):.3f}",
        ]
    )
    print(table(["tree", "rollouts/s (c=32)", "server CPU ms/rollout"], rows))


if __name__ == "__main__":
    main()
