"""Issue 30: a real-model policy against an OpenAI-compatible model server, beside the floor.

The OpenAI Agents multiply rollout (a ``multiply`` tool call, then the answer: 2 model calls
per rollout) against one model server on loopback (our ``PolicyServer`` in its own process,
answering after 0 ms, 200 ms or 2 s), at concurrency 32 and 256. Four ways, one run:

- ``floor``: openai-agents alone: ``Runner.run`` of an ``Agent`` on
  ``OpenAIChatCompletionsModel`` over one ``AsyncOpenAI`` client pointed at the model
  server, ``asyncio.gather`` under a semaphore. No osmosis, no LiteLLM.
- ``plugin``: ``pytest --osmosis-dataset rows.jsonl --osmosis-model openai/bench-model
  --osmosis-concurrency N`` with ``OPENAI_BASE_URL`` on the model server: the rollout calls
  the plugin's policy endpoint, whose ``LiteLLMPolicy`` calls the model server through the
  ``openai`` SDK (the OpenAI-compatible route).
- ``plugin-litellm``: the same with ``--osmosis-force-litellm`` (the route before issue 30).
- ``plugin-no-shortcuts`` (only with ``--modes``): the same with ``OSMOSIS_NO_SHORTCUTS=1``:
  the rollout's own model calls go through ``litellm.acompletion`` instead of the lean
  stand-in (what the shortcut earns, issue 34).
- ``official``: the official ``osmosis-ai`` 0.3.8 SDK's ``LocalBackend`` loop (its own
  Python 3.12 virtualenv, ``bench/.cache/official-venv``), each rollout's
  ``chat_completions_url`` on the model server itself (no endpoint between).

Rates are over the run phase (imports excluded); CPU is the client process's
``getrusage`` user+system over that span, per rollout (the model server's is not counted).
Then ``LiteLLMPolicy.complete`` calls on each route against the 0 ms server, 1, 32 and 256 in
flight (at least ``--cpu-calls``), give the policy side's CPU per model call
(``time.process_time``; the model server's is not counted).

    .venv/bin/python bench/bench_model_server.py [--latencies 0,200,2000]
        [--concurrency 32,256] [--min-rows 200] [--repeats 1] [--cpu-calls 500]
"""

from __future__ import annotations

import argparse
import json
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

from _benchlib import BASE_ENV, OURS_PYTHON, machine, median, official_python, run_child, table
from bench_vs_official import GRADER, OPENAI_WORKFLOW, PLUGIN_CONFTEST, POLICY

KEY = "sk-bench-model-server-0123456789"

MODEL_SERVER = """
import importlib.util, sys, time
from osmosis_rollout.controller import PolicyServer

spec = importlib.util.spec_from_file_location("bench_policy", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with PolicyServer(module.policy, api_key=sys.argv[2]) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
"""

FLOOR = '''
import asyncio, json, os, resource, sys, time
from agents import Agent, ModelSettings, Runner, function_tool, set_tracing_disabled
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from openai import AsyncOpenAI

base_url, key, rows_path, concurrency = sys.argv[1:5]
set_tracing_disabled(True)
rows = [json.loads(line) for line in open(rows_path)]


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


async def run():
    client = AsyncOpenAI(base_url=base_url, api_key=key)
    model = OpenAIChatCompletionsModel(model="bench-model", openai_client=client)
    gate = asyncio.Semaphore(int(concurrency))

    async def one(row):
        async with gate:
            agent = Agent(
                name="multiply-agent",
                instructions="Use the multiply tool when arithmetic is required.",
                model=model,
                model_settings=ModelSettings(temperature=1.0, max_tokens=256),
                tools=[multiply],
            )
            result = await Runner.run(agent, row["user_prompt"])
            return row["ground_truth"] in str(result.final_output)

    return await asyncio.gather(*(one(row) for row in rows))


r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
passed = asyncio.run(run())
t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
with open(os.environ["BENCH_REPORT"], "w") as fh:
    json.dump({"wall": t1 - t0,
               "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
               "failed": sum(not ok for ok in passed)}, fh)
'''

OFFICIAL = """
import asyncio, importlib.util, json, os, resource, sys, time
from osmosis_ai.rollout import (AgentWorkflowConfig, ConcurrencyConfig, ExecutionRequest,
                                LocalBackend, RolloutContext)

main_path, base_url, key, rows_path, concurrency = sys.argv[1:6]
spec = importlib.util.spec_from_file_location("bench_main", main_path)
main = importlib.util.module_from_spec(spec)
spec.loader.exec_module(main)
rows = [json.loads(line) for line in open(rows_path)]


async def run():
    backend = LocalBackend(
        workflow=main.MultiplyWorkflow, grader=main.MultiplyGrader,
        workflow_config=AgentWorkflowConfig(
            name="bench", concurrency=ConcurrencyConfig(max_concurrent=int(concurrency))))

    async def one(i, row):
        rid = f"row-{i}"
        ctx = RolloutContext(chat_completions_url=base_url, api_key=key, rollout_id=rid)
        with ctx:
            out = await backend.execute(ExecutionRequest(
                id=rid, prompt=[{"role": "user", "content": row["user_prompt"]}],
                label=row["ground_truth"]))
        result = out.result
        return result.sample.reward if result.sample is not None else None

    return await asyncio.gather(*(one(i, r) for i, r in enumerate(rows)))


r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
rewards = asyncio.run(run())
t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
with open(os.environ["BENCH_REPORT"], "w") as fh:
    json.dump({"wall": t1 - t0,
               "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
               "failed": sum(r != 1.0 for r in rewards)}, fh)
"""

CPU_PER_CALL = """
import asyncio, json, os, sys, time
from osmosis_rollout.policy import ChatRequest, LiteLLMPolicy

base_url, key, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
TOOL = {"type": "function", "function": {"name": "multiply", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}
REQUEST = ChatRequest(messages=[{"role": "user", "content": "What is 6 times 7?"}],
                      tools=[TOOL], params={"temperature": 1.0, "max_tokens": 256},
                      rollout_id="cpu")


async def measure(force, in_flight):
    policy = LiteLLMPolicy("openai/bench-model", api_base=base_url, api_key=key,
                           force_litellm=force, max_connections=in_flight)
    gate = asyncio.Semaphore(in_flight)

    async def one():
        async with gate:
            await policy.complete(REQUEST)

    await asyncio.gather(*(one() for _ in range(max(20, in_flight))))  # warm: imports, pool
    n = max(calls, 4 * in_flight)
    t0 = time.process_time()
    await asyncio.gather(*(one() for _ in range(n)))
    return {"route": policy.route, "in_flight": in_flight,
            "cpu_ms": 1000 * (time.process_time() - t0) / n}


async def main():
    return [await measure(force, n) for force in (False, True) for n in (1, 32, 256)]


with open(os.environ["BENCH_REPORT"], "w") as fh:
    json.dump({"routes": asyncio.run(main())}, fh)
"""


def write_workspace(root: Path) -> dict[str, Path]:
    """The plugin workspace, the official workflow, the child scripts and the policy."""
    ours = root / "ours"
    (ours / "rollouts" / "bench").mkdir(parents=True)
    (ours / "rollouts" / "bench" / "main.py").write_text(
        textwrap.dedent(OPENAI_WORKFLOW.format(sdk="osmosis_rollout")) + GRADER
    )
    (ours / "conftest.py").write_text(textwrap.dedent(PLUGIN_CONFTEST.format(framework="agents")))
    (ours / "pytest.ini").write_text("[pytest]\n")
    (ours / "data").mkdir()
    official = root / "official_main.py"
    official.write_text(textwrap.dedent(OPENAI_WORKFLOW.format(sdk="osmosis_ai.rollout")) + GRADER)
    paths = {"ours": ours, "official": official}
    for name, text in (
        ("policy", POLICY),
        ("model_server", MODEL_SERVER),
        ("floor", FLOOR),
        ("official_loop", OFFICIAL),
        ("cpu_per_call", CPU_PER_CALL),
    ):
        paths[name] = root / f"{name}.py"
        paths[name].write_text(textwrap.dedent(text))
    return paths


def write_rows(ours: Path, rows: int) -> str:
    """``data/rowsN.jsonl`` of multiply questions (the label is the product)."""
    path = ours / "data" / f"rows{rows}.jsonl"
    if not path.exists():
        with path.open("w") as fh:
            for i in range(rows):
                a, b = i % 89 + 3, i % 7 + 2
                row = {"user_prompt": f"What is {a} times {b}?", "ground_truth": str(a * b)}
                fh.write(json.dumps(row) + "\n")
    return f"data/rows{rows}.jsonl"


class ModelServer:
    """Our PolicyServer in its own process, answering the multiply script after ``latency_ms``."""

    def __init__(self, paths: dict[str, Path], latency_ms: float) -> None:
        env = {**os.environ, **BASE_ENV, "BENCH_LATENCY_MS": str(latency_ms)}
        self.proc = subprocess.Popen(
            [OURS_PYTHON, str(paths["model_server"]), str(paths["policy"]), KEY],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        self.base = self.proc.stdout.readline().strip()
        if not self.base.startswith("http"):
            self.close()
            raise SystemExit("the model server did not start")

    def url(self, name: str) -> str:
        """A rollout-scoped chat-completions base URL (clients append /chat/completions)."""
        return f"{self.base}/v1/rollouts/{name}"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


def run_mode(
    mode: str, paths: dict[str, Path], server: ModelServer, rows: int, concurrency: int
) -> dict[str, Any]:
    ours = paths["ours"]
    rows_rel = write_rows(ours, rows)
    url = server.url(mode)
    timeout = 900
    if mode == "floor":
        argv = [OURS_PYTHON, str(paths["floor"]), url, KEY, str(ours / rows_rel), str(concurrency)]
        report = run_child(argv, cwd=ours, timeout=timeout)
    elif mode == "official":
        argv = [official_python("openai"), str(paths["official_loop"]), str(paths["official"]),
                url, KEY, str(ours / rows_rel), str(concurrency)]  # fmt: skip
        report = run_child(argv, cwd=ours, timeout=timeout)
    else:
        argv = [
            OURS_PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            f"--osmosis-dataset={rows_rel}", "--osmosis-model=openai/bench-model",
            f"--osmosis-concurrency={concurrency}", "--osmosis-progress=off",
            f"--osmosis-output={tempfile.mkdtemp(prefix='bench-ms-out-', dir=ours)}",
        ]  # fmt: skip
        if mode == "plugin-litellm":
            argv.append("--osmosis-force-litellm")
        env = {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": KEY}
        if mode == "plugin-no-shortcuts":
            env["OSMOSIS_NO_SHORTCUTS"] = "1"
        report = run_child(argv, cwd=ours, env=env, timeout=timeout)
    if report["failed"]:
        raise SystemExit(f"{mode}: {report['failed']} of {rows} rollouts did not earn reward 1.0")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--latencies", default="0,200,2000", help="model server ms per call")
    parser.add_argument("--concurrency", default="32,256")
    parser.add_argument("--min-rows", type=int, default=200, help="rows: max(this, 2 x conc)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--modes", default="floor,plugin,plugin-litellm,official")
    parser.add_argument("--cpu-calls", type=int, default=500)
    args = parser.parse_args()
    latencies = [float(x) for x in args.latencies.split(",")]
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    modes = args.modes.split(",")
    if "official" in modes:
        official_python("openai")
    print(machine())
    results: dict[tuple[float, int, str], list[dict[str, Any]]] = defaultdict(list)
    cpu_routes: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-model-server-") as tmp:
        paths = write_workspace(Path(tmp))
        for latency in latencies:
            server = ModelServer(paths, latency)
            try:
                if latency == 0 and args.cpu_calls:
                    argv = [OURS_PYTHON, str(paths["cpu_per_call"]), server.url("cpu"), KEY,
                            str(args.cpu_calls)]  # fmt: skip
                    cpu_routes = run_child(argv, cwd=paths["ours"])["routes"]
                for _ in range(args.repeats):
                    for conc in concurrencies:
                        rows = max(args.min_rows, 2 * conc)
                        for mode in modes:
                            started = time.perf_counter()
                            report = run_mode(mode, paths, server, rows, conc)
                            report["rows"] = rows
                            results[(latency, conc, mode)].append(report)
                            print(
                                f"  {latency:>5g} ms c={conc:<3} {mode:14} "
                                f"{rows / report['wall']:7.1f} rollouts/s "
                                f"({time.perf_counter() - started:.0f} s with start-up)",
                                file=sys.stderr,
                            )
            finally:
                server.close()
    out = []
    for latency in latencies:
        for conc in concurrencies:
            rates = {
                mode: runs[0]["rows"] / median([r["wall"] for r in runs])
                for mode in modes
                if (runs := results.get((latency, conc, mode)))
            }
            for mode, rate in rates.items():
                runs = results[(latency, conc, mode)]
                cpu_ms = 1000 * median([r["cpu"] for r in runs]) / runs[0]["rows"]
                out.append(
                    [
                        f"{latency:g}", conc, runs[0]["rows"], mode, f"{rate:.1f}",
                        f"{cpu_ms:.2f}",
                        f"{rate / rates['floor']:.2f}" if "floor" in rates else "-",
                        f"{rate / rates['official']:.2f}" if "official" in rates else "-",
                    ]
                )  # fmt: skip
    print(
        f"2 model calls per rollout; median of {args.repeats} run(s); rates over the run "
        "phase (imports excluded); cpu = the client process per rollout"
    )
    print(
        table(
            [
                "ms/call",
                "conc",
                "rows",
                "mode",
                "rollouts/s",
                "cpu ms/rollout",
                "vs floor",
                "vs official",
            ],
            out,
        )
    )
    if cpu_routes:
        print(
            f"\npolicy side: LiteLLMPolicy.complete against the 0 ms server, at least "
            f"{args.cpu_calls} calls (4 x in flight), time.process_time per call:"
        )
        print(
            table(
                ["route", "calls in flight", "cpu ms per model call"],
                [[r["route"], r["in_flight"], f"{r['cpu_ms']:.3f}"] for r in cpu_routes],
            )
        )


if __name__ == "__main__":
    main()
