"""Plugin throughput vs a bare LocalBackend loop vs the official ``osmosis-ai`` 0.3.8 SDK.

A multiply rollout (a tool call, then an answer: 2 model calls per rollout) over 200 rows,
for OpenAI Agents and Strands, with a scripted policy answering after 0 ms and 50 ms, at
concurrency 1 and 32. Three ways to run the same rows, side by side in one run:

- ``plugin``: ``pytest --osmosis-dataset rows.jsonl --osmosis-policy policy.py:policy
  --osmosis-concurrency N`` (the workflow imports ``osmosis_rollout``);
- ``plugin-served`` (only with ``--modes``): the same with ``--osmosis-serve``: the plugin
  starts the workspace's rollout server as a subprocess and drives it over HTTP; its rate is
  over the report's ``rollouts_wall_s`` (first rollout start to last end: the server's
  start-up is left out), and the server's CPU is not in the figures;
- ``bare``: our ``LocalBackend.execute`` under a ``RolloutContext`` per row,
  ``asyncio.gather`` over the rows, no pytest (the same workflow file);
- ``official``: the same loop with the official SDK's ``LocalBackend``/``RolloutContext``
  in its own Python 3.12 virtualenv (``bench/.cache/official-venv``, created on first use;
  Strands uses ``official-strands-venv`` with mcp 2.3.0 forced: see ``_benchlib``),
  running the same workflow with ``osmosis_ai.rollout`` imports (official integrations:
  they stream every model call).

Every child process hosts its own ``PolicyServer`` (ours; streaming and non-streaming; the
official child imports it from this repository), so each child's CPU includes serving its
own model calls, equally. Measured inside each child from just before the backend/policy
server start (plugin: the ``pytest_runtestloop`` hook, which includes its start-up of the
runtime) to the last result; framework imports happen before (the plugin workspace's
conftest imports them), so import time is not in the figures. CPU is
``getrusage(RUSAGE_SELF)`` user+system over that span (all threads); peak RSS is the
child's ``ru_maxrss`` at the end. Medians of ``--repeats`` runs, interleaved.

    .venv/bin/python bench/bench_vs_official.py [--rows 200] [--repeats 3]
        [--frameworks openai,strands] [--latencies 0,50] [--concurrency 1,32]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import (
    OURS_PYTHON,
    REPO,
    machine,
    median,
    official_python,
    run_child,
    table,
)

OPENAI_WORKFLOW = '''
from agents import ModelSettings, Runner, function_tool
from {sdk} import AgentWorkflow, Grader
from {sdk}.integrations.agents.openai_agents import (
    OsmosisAgent, OsmosisMemorySession, OsmosisRolloutModel,
)


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


class MultiplyWorkflow(AgentWorkflow):
    async def run(self, ctx):
        agent = OsmosisAgent(
            name="multiply-agent",
            instructions="Use the multiply tool when arithmetic is required.",
            model=OsmosisRolloutModel(),
            model_settings=ModelSettings(temperature=1.0, max_tokens=256),
            tools=[multiply],
        )
        await Runner.run(agent, ctx.prompt, session=OsmosisMemorySession())
'''

STRANDS_WORKFLOW = '''
from strands import tool
from {sdk} import AgentWorkflow, Grader
from {sdk}.integrations.agents.strands import OsmosisRolloutModel, OsmosisStrandsAgent


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


class MultiplyWorkflow(AgentWorkflow):
    async def run(self, ctx):
        agent = OsmosisStrandsAgent(
            model=OsmosisRolloutModel(params={{"temperature": 1.0, "max_tokens": 256}}),
            system_prompt="Use the multiply tool when arithmetic is required.",
            tools=[multiply],
            messages=[],
            callback_handler=None,
        )
        await agent.invoke_async(ctx.prompt[-1]["content"])
'''

GRADER = """

def _last_text(sample):
    for item in reversed(sample.messages):
        if item.get("role") != "assistant":
            continue
        content = item.get("content")
        if isinstance(content, str):
            return content
        for block in content or []:
            if isinstance(block, dict) and block.get("text"):
                return block["text"]
    return ""


class MultiplyGrader(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.label in _last_text(ctx.sample) else 0.0)
"""

POLICY = '''
import asyncio
import os
import re

from osmosis_rollout.policy import ToolCall

LATENCY = float(os.environ.get("BENCH_LATENCY_MS", "0")) / 1000


def _text(content):
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


async def policy(request):
    """First call: multiply(a, b). After the tool result: the answer."""
    if LATENCY:
        await asyncio.sleep(LATENCY)
    last = request.messages[-1]
    if last.get("role") == "tool":
        return "The answer is " + _text(last.get("content")).strip()
    user = next(m for m in reversed(request.messages) if m.get("role") == "user")
    a, b = (int(n) for n in re.findall(r"\\d+", _text(user["content"]))[:2])
    return ToolCall("multiply", {"a": a, "b": b})
'''

PLUGIN_CONFTEST = """
import json, os, resource, time
import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import litellm  # noqa: F401  (imports happen before the measured span, as in the bare loops)
import {framework}  # noqa: F401


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session):
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    try:
        return (yield)
    finally:
        t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
        with open(os.environ["BENCH_REPORT"], "w") as fh:
            json.dump({{"wall": t1 - t0,
                       "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
                       "maxrss_kb": r1.ru_maxrss,
                       "failed": session.testsfailed}}, fh)
"""

LOOP = """
import asyncio, importlib.util, json, os, resource, sys, time

sdk, main_path, policy_path, rows_path, concurrency, streaming = sys.argv[1:7]
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
if sdk == "official":
    from osmosis_ai.rollout import (AgentWorkflowConfig, ConcurrencyConfig, ExecutionRequest,
                                    LocalBackend, RolloutContext)
else:
    from osmosis_rollout import (AgentWorkflowConfig, ConcurrencyConfig, ExecutionRequest,
                                 LocalBackend, RolloutContext)
from osmosis_rollout.controller import PolicyServer


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


main = load("bench_main", main_path)
pol = load("bench_policy", policy_path)
rows = [json.loads(line) for line in open(rows_path)]


async def run():
    backend = LocalBackend(
        workflow=main.MultiplyWorkflow, grader=main.MultiplyGrader,
        workflow_config=AgentWorkflowConfig(
            name="bench", concurrency=ConcurrencyConfig(max_concurrent=int(concurrency))))
    with PolicyServer(pol.policy) as server:
        async def one(i, row):
            rid = f"row-{i}"
            ctx = RolloutContext(chat_completions_url=server.rollout_url(rid),
                                 api_key=server.api_key, rollout_id=rid)
            if streaming == "hint-off":
                ctx.streaming = False  # what the plugin tells our integrations
            with ctx:
                out = await backend.execute(ExecutionRequest(
                    id=rid, prompt=[{"role": "user", "content": row["user_prompt"]}],
                    label=row["ground_truth"]))
            server.release(rid)
            result = out.result
            return result.sample.reward if result.sample is not None else None
        return await asyncio.gather(*(one(i, r) for i, r in enumerate(rows)))


r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
rewards = asyncio.run(run())
t1, r1 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
with open(os.environ["BENCH_REPORT"], "w") as fh:
    json.dump({"wall": t1 - t0,
               "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
               "maxrss_kb": r1.ru_maxrss,
               "failed": sum(r != 1.0 for r in rewards)}, fh)
"""

FRAMEWORKS = {
    "openai": (OPENAI_WORKFLOW, "agents"),
    "strands": (STRANDS_WORKFLOW, "strands"),
}


def make_workspace(root: Path, framework: str, rows: int) -> dict[str, Path]:
    """Write both workflow variants, the policy, the rows and the plugin workspace."""
    template, module = FRAMEWORKS[framework]
    ours = root / framework / "ours"
    (ours / "rollouts" / "bench").mkdir(parents=True)
    (ours / "rollouts" / "bench" / "main.py").write_text(
        textwrap.dedent(template.format(sdk="osmosis_rollout")) + GRADER
    )
    official = root / framework / "official_main.py"
    official.write_text(textwrap.dedent(template.format(sdk="osmosis_ai.rollout")) + GRADER)
    (ours / "policy.py").write_text(textwrap.dedent(POLICY))
    (ours / "conftest.py").write_text(textwrap.dedent(PLUGIN_CONFTEST.format(framework=module)))
    (ours / "pytest.ini").write_text("[pytest]\n")
    (ours / "data").mkdir()
    with (ours / "data" / "rows.jsonl").open("w") as fh:
        for i in range(rows):
            a, b = i % 89 + 3, i % 7 + 2
            fh.write(
                json.dumps({"user_prompt": f"What is {a} times {b}?", "ground_truth": str(a * b)})
                + "\n"
            )
    loop = root / "loop.py"
    loop.write_text(textwrap.dedent(LOOP))
    return {"ours": ours, "official": official, "loop": loop}


def run_mode(
    mode: str,
    framework: str,
    paths: dict[str, Path],
    concurrency: int,
    latency: float,
    artifacts: Path,
) -> dict[str, Any]:
    env = {"BENCH_LATENCY_MS": str(latency), "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(artifacts)}
    ours = paths["ours"]
    rows = str(ours / "data" / "rows.jsonl")
    if mode in ("plugin", "plugin-served"):
        argv = [
            OURS_PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--osmosis-dataset=data/rows.jsonl", "--osmosis-policy=policy.py:policy",
            f"--osmosis-concurrency={concurrency}", f"--osmosis-output={artifacts / 'out'}",
            *(["--osmosis-serve"] if mode == "plugin-served" else []),
        ]  # fmt: skip
        shutil.rmtree(artifacts / "out", ignore_errors=True)  # a run replaces no earlier run
        report = run_child(argv, cwd=ours, env=env)
        if mode == "plugin-served":
            # From the first rollout's start to the last one's end: not the server's start-up.
            summary = json.loads((artifacts / "out" / "report.json").read_text())["summary"]
            report["wall"] = float(summary["rollouts_wall_s"])
    elif mode in ("bare", "bare-stream"):
        hint = "hint-off" if mode == "bare" else "default"
        if mode == "bare-stream":
            env["OSMOSIS_ROLLOUT_STREAMING"] = "always"
        argv = [OURS_PYTHON, str(paths["loop"]), "ours", str(ours / "rollouts/bench/main.py"),
                str(ours / "policy.py"), rows, str(concurrency), hint]  # fmt: skip
        report = run_child(argv, cwd=ours, env=env)
    else:
        env["PYTHONPATH"] = str(REPO)  # the official child imports our PolicyServer
        argv = [official_python(framework), str(paths["loop"]), "official", str(paths["official"]),
                str(ours / "policy.py"), rows, str(concurrency), "default"]  # fmt: skip
        report = run_child(argv, cwd=ours, env=env)
    if report["failed"]:
        raise SystemExit(f"{mode}: {report['failed']} rows did not earn reward 1.0")
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--frameworks", default="openai,strands")
    parser.add_argument("--latencies", default="0,50")
    parser.add_argument("--concurrency", default="1,32")
    parser.add_argument(
        "--modes",
        default="plugin,bare,official,bare-stream",
        help="bare-stream (ours with streaming forced, as the official integrations do) "
        "runs at the highest concurrency only",
    )
    args = parser.parse_args()
    frameworks = args.frameworks.split(",")
    latencies = [float(x) for x in args.latencies.split(",")]
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    modes = args.modes.split(",")
    for fw in frameworks:
        official_python(fw)
    print(machine())
    results: dict[tuple[str, float, int, str], list[dict[str, Any]]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-vs-official-") as tmp:
        root = Path(tmp)
        paths = {fw: make_workspace(root, fw, args.rows) for fw in frameworks}
        for repeat in range(args.repeats):
            for fw in frameworks:
                for latency in latencies:
                    for conc in concurrencies:
                        for mode in modes:
                            if mode == "bare-stream" and conc != max(concurrencies):
                                continue
                            artifacts = root / "artifacts" / f"{fw}-{latency}-{conc}-{mode}"
                            report = run_mode(mode, fw, paths[fw], conc, latency, artifacts)
                            results[(fw, latency, conc, mode)].append(report)
                            print(
                                f"  run {repeat + 1}: {fw:8} {latency:>4g} ms c={conc:<3} "
                                f"{mode:12} {args.rows / report['wall']:8.1f} rollouts/s",
                                file=sys.stderr,
                            )
    rows_out = []
    for fw in frameworks:
        for latency in latencies:
            for conc in concurrencies:
                key = (fw, latency, conc, "official")
                official_rate = (
                    args.rows / median([r["wall"] for r in results[key]])
                    if key in results
                    else None
                )
                bare_key = (fw, latency, conc, "bare")
                bare_rate = (
                    args.rows / median([r["wall"] for r in results[bare_key]])
                    if bare_key in results
                    else None
                )
                for mode in modes:
                    runs = results.get((fw, latency, conc, mode))
                    if not runs:
                        continue
                    rate = args.rows / median([r["wall"] for r in runs])
                    cpu_ms = 1000 * median([r["cpu"] for r in runs]) / args.rows
                    rss = median([r["maxrss_kb"] for r in runs]) / 1024
                    rows_out.append(
                        [
                            fw, f"{latency:g}", conc, mode, f"{rate:.1f}", f"{cpu_ms:.2f}",
                            f"{rss:.0f}",
                            f"{rate / official_rate:.2f}" if official_rate else "-",
                            f"{rate / bare_rate:.2f}" if bare_rate else "-",
                        ]
                    )  # fmt: skip
    print(
        f"{args.rows} rows x 2 model calls, median of {args.repeats} runs; "
        "rates over the run phase (imports excluded)"
    )
    print(
        table(
            [
                "framework",
                "ms",
                "conc",
                "mode",
                "rollouts/s",
                "cpu ms/rollout",
                "peak MB",
                "vs official",
                "vs bare",
            ],
            rows_out,
        )
    )


if __name__ == "__main__":
    main()
