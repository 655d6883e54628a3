"""Issue 16, target 1: served rollouts that stream, ours vs the official server (0.3.8).

Each server runs under uvicorn in its own subprocess (ours on this venv, the official one
in ``bench/.cache/official-venv``, or ``official-strands-venv`` for Strands: CPython 3.12,
built on first use by ``_benchlib.official_python``) with the same official-style rollout: the
agent is built in ``run()`` with ``OsmosisRolloutModel()``, a ``multiply`` function tool and
``ModelSettings(temperature=0, max_tokens=256)`` (OpenAI Agents; Strands: ``params``), so
2 model calls per rollout, each streamed (the official model always streams; ours streams
by default). Both call the same streaming chat endpoint (``bench_endpoint_client.py``'s, in
its own subprocess) that sends each reply as one SSE chunk (the official bridge's shape) or
as 64 chunks (an inference server's). The same controller drives both: our
``RolloutClient`` in this process, ``--rollouts`` rollouts at each concurrency, one client
per 16 in flight. Reported: rollouts/s and the server process's CPU per rollout
(``/proc/<pid>/stat``), servers interleaved, medians of ``--repeats``. Every rollout must
earn reward 1.0 or the script stops. OpenAI Agents tracing is disabled in both servers.

    .venv/bin/python bench/bench_served_streaming.py --framework openai --rollouts 300
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import machine, median, official_python, table
from bench_server import drive, free_port, proc_cpu, start_server

HERE = Path(__file__).resolve().parent

SERVER = """
import sys
import uvicorn
official = sys.argv[1] == "official"
framework = sys.argv[3]
if official:
    from osmosis_ai.rollout import (AgentWorkflow, AgentWorkflowConfig, ConcurrencyConfig,
                                    Grader, LocalBackend)
    from osmosis_ai.rollout.server import create_rollout_server
    if framework == "openai":
        from osmosis_ai.rollout.integrations.agents.openai_agents import (
            OsmosisAgent, OsmosisMemorySession, OsmosisRolloutModel)
    else:
        from osmosis_ai.rollout.integrations.agents.strands import (
            OsmosisRolloutModel, OsmosisStrandsAgent)
else:
    from osmosis_rollout import (AgentWorkflow, AgentWorkflowConfig, ConcurrencyConfig,
                                 Grader, LocalBackend)
    from osmosis_rollout.server import create_rollout_server
    if framework == "openai":
        from osmosis_rollout.integrations.agents.openai_agents import (
            OsmosisAgent, OsmosisMemorySession, OsmosisRolloutModel)
    else:
        from osmosis_rollout.integrations.agents.strands import (
            OsmosisRolloutModel, OsmosisStrandsAgent)

if framework == "openai":
    from agents import ModelSettings, Runner, function_tool

    @function_tool
    def multiply(a: int, b: int) -> int:
        \"\"\"Multiply two integers.\"\"\"
        return a * b

    class Work(AgentWorkflow):
        async def run(self, ctx):
            agent = OsmosisAgent(
                name="multiply", instructions="Use the multiply tool.",
                model=OsmosisRolloutModel(), tools=[multiply],
                model_settings=ModelSettings(temperature=0, max_tokens=256))
            session = OsmosisMemorySession()
            await Runner.run(agent, ctx.prompt, session=session)
else:
    from strands import tool

    @tool
    def multiply(a: int, b: int) -> int:
        \"\"\"Multiply two integers.\"\"\"
        return a * b

    class Work(AgentWorkflow):
        async def run(self, ctx):
            agent = OsmosisStrandsAgent(
                model=OsmosisRolloutModel(params={"temperature": 0, "max_tokens": 256}),
                tools=[multiply], system_prompt="Use the multiply tool.",
                callback_handler=None)
            await agent.invoke_async(ctx.prompt[-1]["content"])


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.label in str(ctx.sample.messages[-1]) else 0.0)


backend = LocalBackend(workflow=Work, grader=Exact,
                       workflow_config=AgentWorkflowConfig(name="bench",
                                                           concurrency=ConcurrencyConfig()))
app = create_rollout_server(backend=backend, configure_logging=False)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
            access_log=False, timeout_keep_alive=60, backlog=4096)
"""


def start_endpoint(chunks: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "BENCH_CHUNKS": str(chunks)}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "bench_endpoint_client.py"), "--serve", str(port)], env=env
    )
    time.sleep(2.0)
    return proc, f"http://127.0.0.1:{port}/v1"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--framework", choices=("openai", "strands"), default="openai")
    parser.add_argument("--rollouts", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", default="32,128")
    parser.add_argument("--chunks", default="1,64")
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    print(machine())
    official_python("openai" if args.framework == "openai" else "strands")
    results: dict[tuple[int, str, int], list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-served-") as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(textwrap.dedent(SERVER))
        for chunks in (int(c) for c in args.chunks.split(",")):
            endpoint, chat_url = start_endpoint(chunks)
            try:
                for repeat in range(args.repeats):
                    for which in ("ours", "official"):
                        proc, url = start_server(
                            which,
                            script,
                            Path(tmp) / which,
                            extra_args=[args.framework],
                            variant="openai" if args.framework == "openai" else "strands",
                        )
                        try:
                            asyncio.run(
                                drive(url, 16, 8, f"w{chunks}{repeat}", 16, chat_url=chat_url)
                            )
                            for conc in concurrencies:
                                cpu0 = proc_cpu(proc.pid)
                                tag = f"r{chunks}-{repeat}c{conc}"
                                run = asyncio.run(
                                    drive(url, args.rollouts, conc, tag, 16, chat_url=chat_url)
                                )
                                run["cpu"] = 1000 * (proc_cpu(proc.pid) - cpu0) / args.rollouts
                                results[(chunks, which, conc)].append(run)
                                print(
                                    f"  {chunks} chunks run {repeat + 1}: {which:8} c={conc:<4} "
                                    f"{run['rate']:7.1f}/s cpu {run['cpu']:.1f} ms",
                                    file=sys.stderr,
                                )
                        finally:
                            proc.terminate()
                            try:
                                proc.wait(30)
                            except subprocess.TimeoutExpired:
                                proc.kill()
            finally:
                endpoint.terminate()
                endpoint.wait(10)
    rows = []
    for chunks in sorted({key[0] for key in results}):
        for conc in concurrencies:
            official = results[(chunks, "official", conc)]
            official_rate = median([r["rate"] for r in official])
            official_cpu = median([r["cpu"] for r in official])
            for which in ("ours", "official"):
                runs = results[(chunks, which, conc)]
                rate = median([r["rate"] for r in runs])
                cpu = median([r["cpu"] for r in runs])
                rows.append(
                    [
                        chunks, which, conc, f"{rate:.1f}", f"{cpu:.2f}",
                        f"{rate / official_rate:.2f}", f"{cpu / official_cpu:.2f}",
                    ]
                )  # fmt: skip
    print(
        f"{args.framework}: {args.rollouts} rollouts per run x 2 streamed model calls, "
        f"median of {args.repeats}"
    )
    headers = ["chunks", "server", "conc", "rollouts/s", "server cpu ms/rollout"]
    print(table([*headers, "rate vs official", "cpu vs official"], rows))


if __name__ == "__main__":
    main()
