"""Issue 16, target 1 (client side): the OpenAI Agents rollout's model calls, lean vs LiteLLM.

The official-style multiply rollout (agent built per rollout, a ``multiply`` function tool,
``ModelSettings(temperature=0, max_tokens=256)``, 2 streamed model calls) runs N times at
concurrency C in this process, against a raw chat endpoint in a subprocess that streams
each reply as one SSE chunk or as 64 chunks. Two models, interleaved, median of R runs:
``lean`` (``OsmosisLitellmModel`` as shipped: the SDK's request building, sent by our httpx
endpoint client) and ``litellm`` (the same model with the SDK's LiteLLM request path). CPU
is this process's user+system time over the run (the endpoint's CPU is not counted).

    .venv/bin/python bench/bench_endpoint_client.py --rollouts 200 --repeats 3
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


async def endpoint_app(scope: Any, receive: Any, send: Any) -> None:
    """A streaming chat endpoint: a tool call, then the answer in ``CHUNKS`` pieces."""
    if scope["type"] != "http":
        return
    raw = b""
    while True:
        message = await receive()
        raw += message.get("body", b"")
        if not message.get("more_body"):
            break
    body = json.loads(raw)
    chunks = int(os.environ.get("BENCH_CHUNKS", "1"))
    base = {"id": "chatcmpl-1", "created": 1, "model": "osmosis-rollout"}
    base["object"] = "chat.completion.chunk"
    if any(m.get("role") == "tool" for m in body["messages"]):
        text = "The product is 42. " * 4
        # Exactly ``chunks`` pieces (the text is longer than 64 characters).
        cuts = [len(text) * i // chunks for i in range(chunks + 1)]
        pieces = [text[a:b] for a, b in itertools.pairwise(cuts)]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": pieces[0]}]
        deltas += [{"content": piece} for piece in pieces[1:]]
        finish = "stop"
    else:
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "multiply", "arguments": '{"a": 6, "b": 7}'}
        deltas = [{"role": "assistant", "tool_calls": [{"index": 0, **call}]}]
        finish = "tool_calls"
    out = b""
    for delta in deltas:
        choice = {"index": 0, "delta": delta, "finish_reason": None}
        out += b"data: " + json.dumps({**base, "choices": [choice]}).encode() + b"\n\n"
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    last = {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    out += b"data: " + json.dumps({**last, "usage": usage}).encode() + b"\n\ndata: [DONE]\n\n"
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": out})


def serve(port: int) -> None:
    import uvicorn

    # A long keep-alive: a client's pooled connection is never closed under it between runs
    # (the official server's LiteLLM client failed a rollout on such a race).
    uvicorn.run(
        endpoint_app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        timeout_keep_alive=300,
        backlog=4096,
    )


async def run_mode(mode: str, url: str, rollouts: int, concurrency: int) -> tuple[float, float]:
    from agents import Agent, ModelSettings, Runner, function_tool
    from agents.extensions.models.litellm_model import LitellmModel

    from osmosis_rollout.context import RolloutContext
    from osmosis_rollout.integrations.agents.openai_agents import (
        OsmosisLitellmModel,
        OsmosisMemorySession,
    )

    class LitellmRouted(OsmosisLitellmModel):  # type: ignore[misc]
        _fetch_response = LitellmModel._fetch_response

    model_class = OsmosisLitellmModel if mode == "lean" else LitellmRouted

    @function_tool
    def multiply(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with slots:
            ctx = RolloutContext(chat_completions_url=url, api_key="k", rollout_id=f"r{i}")
            with ctx:
                session = OsmosisMemorySession()
                agent = Agent(
                    name="multiply",
                    instructions="Use the multiply tool.",
                    model=model_class(streaming=True),
                    model_settings=ModelSettings(temperature=0, max_tokens=256),
                    tools=[multiply],
                )
                await Runner.run(agent, "What is 6 times 7?", session=session)
                assert "42" in json.dumps(session.items)

    await one(-1)  # warm-up: first-call imports and connections
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0, wall0 = usage.ru_utime + usage.ru_stime, time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(rollouts)))
    wall = time.perf_counter() - wall0
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return rollouts / wall, (usage.ru_utime + usage.ru_stime - cpu0) * 1000 / rollouts


def child(args: argparse.Namespace) -> None:
    rate, cpu = asyncio.run(run_mode(args.mode, args.url, args.rollouts, args.concurrency))
    print(json.dumps({"rate": rate, "cpu": cpu}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrency", default="32,128")
    parser.add_argument("--chunks", default="1,64")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child", help=argparse.SUPPRESS, dest="mode")
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return
    if args.mode:
        args.concurrency = int(args.concurrency)
        child(args)
        return
    rows = []
    for chunks in (int(c) for c in args.chunks.split(",")):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env = {**os.environ, "BENCH_CHUNKS": str(chunks)}
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(port)], env=env)
        try:
            time.sleep(2.0)
            url = f"http://127.0.0.1:{port}/v1"
            for conc in (int(c) for c in args.concurrency.split(",")):
                results: dict[str, list[tuple[float, float]]] = {"lean": [], "litellm": []}
                for _ in range(args.repeats):
                    for mode in results:
                        command = [sys.executable, __file__, "--child", mode, "--url", url]
                        command += ["--rollouts", str(args.rollouts)]
                        command += ["--concurrency", str(conc)]
                        out = subprocess.run(
                            command, capture_output=True, text=True, timeout=600, check=True
                        )
                        got = json.loads(out.stdout.strip().splitlines()[-1])
                        results[mode].append((got["rate"], got["cpu"]))
                medians = {
                    mode: (
                        statistics.median(r for r, _ in runs),
                        statistics.median(c for _, c in runs),
                    )
                    for mode, runs in results.items()
                }
                for mode, (rate, cpu) in medians.items():
                    ratio = rate / medians["litellm"][0]
                    cpu_ratio = cpu / medians["litellm"][1]
                    rows.append((chunks, conc, mode, rate, cpu, ratio, cpu_ratio))
        finally:
            server.terminate()
            server.wait(timeout=10)
    print(f"{args.rollouts} rollouts x 2 streamed calls, median of {args.repeats}")
    header = "chunks  conc     mode  rollouts/s  cpu ms/rollout  vs litellm  cpu vs litellm"
    print(header)
    print("-" * len(header))
    for chunks, conc, mode, rate, cpu, ratio, cpu_ratio in rows:
        print(
            f"{chunks:6d} {conc:5d} {mode:>8}  {rate:10.1f}  {cpu:14.2f}"
            f"  {ratio:10.2f}  {cpu_ratio:14.2f}"
        )


if __name__ == "__main__":
    main()
