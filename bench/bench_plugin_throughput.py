"""Plugin throughput: 200 rows whose policy answers after 50 ms.

Compares, side by side in one run (medians of --repeats runs):
  - the plugin at concurrency 32 (``pytest --osmosis-dataset ... --osmosis-concurrency 32``),
  - the plugin at concurrency 1,
  - a bare ``LocalBackend`` loop (asyncio.gather, 32 in flight) over the same rows with no pytest.
All use the same workflow and the same scripted policy served by ``PolicyServer``.

``--workflow ask-once`` (the default): one non-streaming chat call on the workflow's own
httpx client, so every call goes over loopback to the policy server's thread.
``--workflow multiply``: the two-call multiply rollout on ``RolloutChatClient`` (a tool
call, the tool's result, the final answer; non-streaming, as the plugin hints).
``--workflow agents``: the same two calls from an official-style OpenAI Agents rollout
(``OsmosisAgent`` + ``OsmosisMemorySession`` + ``Runner.run``), so the integration's
request path (LiteLLM or its lean stand-in) is measured too.
``--shortcuts-off`` adds the plugin with ``OSMOSIS_NO_SHORTCUTS=1`` (every speed shortcut
off: the integrations call ``litellm.acompletion``); ``--base`` may be given several times
as ``NAME=DIR``.

    .venv/bin/python bench/bench_plugin_throughput.py [--rows 200] [--latency-ms 50] [--repeats 3]
    .venv/bin/python bench/bench_plugin_throughput.py --workflow multiply
    .venv/bin/python bench/bench_plugin_throughput.py --rows 400 --latency-ms 200 --no-c1 [--base DIR]
    .venv/bin/python bench/bench_plugin_throughput.py --rows 400 --latency-ms 200 --no-c1 \\
        --workflow agents --shortcuts-off

The last one is issue 25's target: 400 rows, a policy that takes 200 ms a call, concurrency
32, the plugin within 1.10x of the bare loop (rollouts wall; the whole command beside it).
``--base DIR`` (``git archive REV osmosis_rollout pytest_osmosis | tar -x -C DIR``) adds that
revision's plugin, interleaved with the others, so a change is measured under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

WORKFLOW = """
import httpx
from osmosis_rollout import AgentWorkflow, Grader, get_rollout_context

_client = None


class AskOnce(AgentWorkflow):
    async def run(self, ctx):
        global _client
        if _client is None:
            _client = httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=None))
        rollout = get_rollout_context()
        response = await _client.post(
            rollout.chat_completions_url + "/chat/completions",
            headers={"Authorization": f"Bearer {rollout.api_key}"},
            json={"model": "osmosis-rollout", "messages": ctx.prompt},
        )
        reply = response.json()["choices"][0]["message"]
        return [*ctx.prompt, reply]


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)
"""

MULTIPLY_WORKFLOW = """
import json
from osmosis_rollout import AgentWorkflow, Grader
from osmosis_rollout.chat_client import RolloutChatClient

TOOLS = [{
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}]


class AskOnce(AgentWorkflow):
    async def run(self, ctx):
        chat = RolloutChatClient(ctx.prompt, tools=TOOLS, temperature=1.0)
        reply = await chat.complete()
        for call in reply.tool_calls:
            args = json.loads(call["function"]["arguments"])
            chat.add_tool_result(call["id"], str(args["a"] * args["b"]))
        await chat.complete()


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)
"""

AGENTS_WORKFLOW = """
from agents import ModelSettings, Runner, function_tool
from osmosis_rollout import AgentWorkflow, Grader
from osmosis_rollout.integrations.agents.openai_agents import (
    OsmosisAgent,
    OsmosisMemorySession,
    OsmosisRolloutModel,
)


@function_tool
def multiply(a: int, b: int) -> int:
    \"\"\"Multiply two integers.\"\"\"
    return a * b


class AskOnce(AgentWorkflow):
    async def run(self, ctx):
        agent = OsmosisAgent(
            name="multiply-agent",
            instructions="Use the multiply tool when arithmetic is required.",
            model=OsmosisRolloutModel(),
            model_settings=ModelSettings(temperature=1.0, max_tokens=4096),
            tools=[multiply],
        )
        await Runner.run(agent, ctx.prompt, session=OsmosisMemorySession())


def _last_text(sample):
    for item in reversed(sample.messages):
        if item.get("role") == "assistant":
            content = item.get("content")
            if isinstance(content, list):
                return "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return content or ""
    return ""


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if _last_text(ctx.sample) == ctx.label else 0.0)
"""

MULTIPLY_POLICY = """
import asyncio, os
from osmosis_rollout.policy import ToolCall
LATENCY = float(os.environ.get("BENCH_LATENCY_MS", "50")) / 1000


async def policy(request):
    await asyncio.sleep(LATENCY)
    results = [m for m in request.messages if m.get("role") == "tool"]
    if results:
        return "answer-" + results[-1]["content"]
    n = int(request.messages[-1]["content"].split()[-1])
    return ToolCall("multiply", {"a": n, "b": 1})
"""

POLICY = """
import asyncio, os
LATENCY = float(os.environ.get("BENCH_LATENCY_MS", "50")) / 1000


async def policy(request):
    await asyncio.sleep(LATENCY)
    return "answer-" + request.messages[-1]["content"].split()[-1]
"""


WORKFLOWS = {"ask-once": WORKFLOW, "multiply": MULTIPLY_WORKFLOW, "agents": AGENTS_WORKFLOW}


def make_workspace(root: Path, rows: int, workflow: str = "ask-once") -> None:
    (root / "rollouts" / "bench").mkdir(parents=True)
    (root / "rollouts" / "bench" / "main.py").write_text(textwrap.dedent(WORKFLOWS[workflow]))
    policy = POLICY if workflow == "ask-once" else MULTIPLY_POLICY
    (root / "policy.py").write_text(textwrap.dedent(policy))
    (root / "data").mkdir()
    with (root / "data" / "rows.jsonl").open("w") as fh:
        for i in range(rows):
            fh.write(
                json.dumps({"user_prompt": f"question {i}", "ground_truth": f"answer-{i}"}) + "\n"
            )
    (root / "pytest.ini").write_text("[pytest]\n")


def _env() -> dict[str, str]:
    # Benchmark with bytecode caching on (as a developer machine has it): this workplace sets
    # PYTHONDONTWRITEBYTECODE, which makes every interpreter start recompile every import.
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_plugin(
    root: Path, concurrency: int, base: Path | None = None, *, shortcuts: bool = True
) -> tuple[float, float]:
    """Return (process wall seconds, rollouts wall seconds from the report); ``base``: a
    source tree put first on ``PYTHONPATH``; ``shortcuts=False`` sets OSMOSIS_NO_SHORTCUTS=1."""
    env = _env()
    if not shortcuts:
        env["OSMOSIS_NO_SHORTCUTS"] = "1"
    if base is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(base), env.get("PYTHONPATH", "")])
    shutil.rmtree(root / "out", ignore_errors=True)  # a run replaces no earlier run
    start = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "--osmosis-dataset=data/rows.jsonl",
            "--osmosis-policy=policy.py:policy",
            f"--osmosis-concurrency={concurrency}",
            "--osmosis-output=out",
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"plugin run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
    report = json.loads((root / "out" / "report.json").read_text())
    return elapsed, float(report["summary"]["rollouts_wall_s"])


def run_bare(root: Path, rows: int, concurrency: int) -> tuple[float, float]:
    """Everything the plugin does for a row, minus pytest: backend.execute under a context."""
    code = textwrap.dedent(f"""
        import asyncio, json, sys, time
        sys.path.insert(0, {str(root)!r})
        start = time.perf_counter()
        from osmosis_rollout import ExecutionRequest, LocalBackend, RolloutContext
        from osmosis_rollout.controller import PolicyServer
        import importlib.util
        spec = importlib.util.spec_from_file_location("bench_main", {str(root / "rollouts/bench/main.py")!r})
        main = importlib.util.module_from_spec(spec); spec.loader.exec_module(main)
        spec = importlib.util.spec_from_file_location("bench_policy", {str(root / "policy.py")!r})
        pol = importlib.util.module_from_spec(spec); spec.loader.exec_module(pol)
        rows = [json.loads(l) for l in open({str(root / "data/rows.jsonl")!r})]

        async def main_():
            backend = LocalBackend(workflow=main.AskOnce, grader=main.Exact)
            from osmosis_rollout._internal.limiter import ConcurrencyLimiter
            backend.limiter = ConcurrencyLimiter(max_concurrent={concurrency})
            with PolicyServer(pol.policy) as server:
                global phase
                async def one(i, row):
                    rid = f"bare-{{i}}"
                    ctx = RolloutContext(chat_completions_url=server.rollout_url(rid), api_key=server.api_key, rollout_id=rid)
                    ctx.streaming = False  # as the plugin hints for its own endpoint
                    with ctx:
                        out = await backend.execute(ExecutionRequest(id=rid, prompt=[{{"role": "user", "content": row["user_prompt"]}}], label=row["ground_truth"]))
                    assert out.result.sample.reward == 1.0, out.result
                t0 = time.perf_counter()
                await asyncio.gather(*(one(i, r) for i, r in enumerate(rows)))
                phase = time.perf_counter() - t0
        phase = 0.0
        asyncio.run(main_())
        print(phase)
    """)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=900,
        env=dict(_env(), _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(root / "bare-artifacts")),
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"bare loop failed:\n{proc.stderr[-3000:]}")
    return elapsed, float(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-c1", action="store_true", help="skip the slow concurrency-1 run")
    parser.add_argument("--workflow", choices=sorted(WORKFLOWS), default="ask-once")
    parser.add_argument(
        "--base",
        action="append",
        default=[],
        metavar="[NAME=]DIR",
        help="another source tree, run interleaved as NAME (default 'base'); repeatable",
    )
    parser.add_argument(
        "--shortcuts-off",
        action="store_true",
        help="also run the plugin with OSMOSIS_NO_SHORTCUTS=1, interleaved",
    )
    args = parser.parse_args()
    os.environ["BENCH_LATENCY_MS"] = str(args.latency_ms)
    bare = "bare LocalBackend c=32"
    names: tuple[str, ...] = ("plugin c=32", bare)
    bases: dict[str, Path] = {}
    for spec in args.base:
        label, _, folder = spec.rpartition("=")
        bases[f"{label or 'base'} plugin c=32"] = Path(folder)
    names = (*names, *bases)
    off = "plugin c=32, shortcuts off"
    if args.shortcuts_off:
        names = (*names, off)
    if not args.no_c1:
        names = (*names, "plugin c=1")
    process: dict[str, list[float]] = {n: [] for n in names}
    phase: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_workspace(root, args.rows, args.workflow)
        run_plugin(root, 32)  # warm-up: bytecode caches
        for _ in range(args.repeats):
            for name in names:
                if name.startswith("bare"):
                    total, rows_wall = run_bare(root, args.rows, 32)
                elif name in bases:
                    total, rows_wall = run_plugin(root, 32, bases[name])
                elif name == off:
                    total, rows_wall = run_plugin(root, 32, shortcuts=False)
                else:
                    total, rows_wall = run_plugin(root, int(name.split("=")[1]))
                process[name].append(total)
                phase[name].append(rows_wall)
    med = {n: statistics.median(phase[n]) for n in names}
    load = os.getloadavg()
    print(
        f"{args.rows} rows, workflow {args.workflow}, policy latency {args.latency_ms:g} ms, "
        f"median of {args.repeats} runs; load average at the end {load[0]:.1f} {load[1]:.1f}"
    )
    print(
        "rollouts wall = first rollout start to last rollout end; process = whole command incl. start-up"
    )
    whole = {n: statistics.median(process[n]) for n in names}
    width = max(26, *(len(n) + 2 for n in names))
    print(
        f"{'mode':<{width}}{'rollouts wall s':>16}{'rows/s':>10}{'vs bare':>10}{'process s':>12}"
        f"{'vs bare':>10}"
    )
    for name in names:
        print(
            f"{name:<{width}}{med[name]:>16.2f}{args.rows / med[name]:>10.1f}"
            f"{med[name] / med[bare]:>10.2f}{whole[name]:>12.2f}{whole[name] / whole[bare]:>10.2f}"
        )
    if "plugin c=1" in med:
        print(f"plugin c=32 is {med['plugin c=1'] / med['plugin c=32']:.1f}x faster than c=1")
    print(f"plugin/bare (rollouts wall) = {med['plugin c=32'] / med[bare]:.2f}")
    print(f"plugin/bare (whole command) = {whole['plugin c=32'] / whole[bare]:.2f}")


if __name__ == "__main__":
    main()
