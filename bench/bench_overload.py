"""The rollout server under overload and under a slowloris: ours vs the official 0.3.8.

**Overload.** The issue-27 scenario scaled to this machine: an official-style OpenAI Agents
rollout (the multiply tool: 2 model calls) whose ``max_concurrent`` is set to the offered
load, a scripted policy answering each model call after ``--policy-delay`` (2 s), every
rollout offered at once through our ``RolloutClient`` (which retries 429 after
``Retry-After``), ``agent_timeout_sec`` ``--deadline`` (30 s). The policy runs in its own
process (a minimal asyncio HTTP server, so its CPU is not the servers'); each server in
its own process: ours is ``osmosis-rollout serve main.py:backend`` (default
``--max-concurrent auto``), the official one ``create_rollout_server`` under uvicorn in
``bench/.cache/official-venv``. The capacity C is measured first: ours with the limit fixed
at the offered load (it admits everything, as the official does) over ``--calibrate``
loads; C is the smallest load whose rollouts/s reach 90% of the best. Then 0.5C, 1C, 2C,
4C for each server, a fresh server per run. Reported per run: admissions answered 202 and
429, rollouts that succeeded, failed by deadline (``timeout``) or otherwise, goodput
(successes per second of the run), the client-side p99 of the 429 answers.

**Slowloris.** Each server at ``--fd-limit`` (1024) open files with an inbound key,
``--slow`` (1,100) connections that send the start of a request without the key and
never finish it; then ``--probes`` ``/health`` probes with the key, each on a new
connection, one a second: how many answer within 1 s, and the slowest.

    .venv/bin/python bench/bench_overload.py [--policy-delay 2] [--deadline 30]
        [--calibrate 50,100,200,400] [--capacity C] [--loads 0.5,1,2,4]
        [--servers ours,official] [--slow 1100] [--fd-limit 1024] [--probes 10]
        [--skip-slowloris] [--skip-overload]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _benchlib import BASE_ENV, OURS_PYTHON, machine, official_python, table

from osmosis_rollout.controller import RolloutClient

POLICY = r"""
import asyncio, json, os, re, sys, time, uuid

DELAY = float(sys.argv[2])


def text(content):
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def reply(body):
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return {"content": "The answer is " + text(last.get("content")).strip()}, "stop"
    user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    numbers = re.findall(r"\d+", text(user.get("content"))) + ["2", "3"]
    args = json.dumps({"a": int(numbers[0]), "b": int(numbers[1])})
    call = {"id": "call_" + uuid.uuid4().hex[:12], "type": "function",
            "function": {"name": "multiply", "arguments": args}}
    return {"content": None, "tool_calls": [call]}, "tool_calls"


def answer(body):
    message, finish = reply(body)
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    base = {"id": "chatcmpl-" + uuid.uuid4().hex[:12], "created": int(time.time()),
            "model": body.get("model") or "osmosis-rollout"}
    if not body.get("stream"):
        payload = {**base, "object": "chat.completion", "usage": usage, "choices": [
            {"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}]}
        return "application/json", json.dumps(payload).encode()
    base["object"] = "chat.completion.chunk"
    events = []

    def chunk(delta, finish_reason=None):
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        events.append("data: " + json.dumps({**base, "choices": [choice]}) + "\n\n")

    if message.get("tool_calls"):
        call = message["tool_calls"][0]
        chunk({"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": call["id"], "type": "function",
             "function": {"name": "multiply", "arguments": call["function"]["arguments"]}}]})
    else:
        chunk({"role": "assistant", "content": message["content"]})
    chunk({}, finish)
    if (body.get("stream_options") or {}).get("include_usage"):
        events.append("data: " + json.dumps({**base, "choices": [], "usage": usage}) + "\n\n")
    events.append("data: [DONE]\n\n")
    return "text/event-stream", "".join(events).encode()


async def handle(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length)) if length else {}
            await asyncio.sleep(DELAY)
            kind, data = answer(body)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: " + kind.encode()
                         + b"\r\ncontent-length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]), backlog=4096)
    async with server:
        await server.serve_forever()


asyncio.run(main())
"""

WORKFLOW = '''
import os
from agents import ModelSettings, Runner, function_tool
from {sdk} import AgentWorkflow, AgentWorkflowConfig, ConcurrencyConfig, Grader, LocalBackend
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


class MultiplyGrader(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)


backend = LocalBackend(
    workflow=MultiplyWorkflow,
    grader=MultiplyGrader,
    workflow_config=AgentWorkflowConfig(
        name="bench",
        concurrency=ConcurrencyConfig(max_concurrent=int(os.environ["BENCH_MAX_CONCURRENT"])),
    ),
)
'''

PROBER = r"""
import json, signal, socket, sys, time

host, port = "127.0.0.1", int(sys.argv[1])
policy_url, out = sys.argv[2], sys.argv[3]
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


def exchange(request):
    t0 = time.perf_counter()
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return data, (time.perf_counter() - t0) * 1000


probes, health, i = [], [], 0
next_health = 0.0
while not stop:
    i += 1
    body = json.dumps({"initial_messages": [{"role": "user", "content": "What is 3 times 7?"}],
                       "rollout_id": "probe", "chat_completions_url": policy_url,
                       "llm_api_key": "unused-llm-key", "label": "x",
                       "agent_timeout_sec": 30}).encode()
    request = (b"POST /rollout HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body) + body)
    try:
        data, ms = exchange(request)
        probes.append((int(data.split()[1]), ms))
    except (OSError, IndexError, ValueError):
        probes.append((0, 0.0))
    if time.monotonic() >= next_health:
        next_health = time.monotonic() + 1
        try:
            with socket.create_connection((host, port), timeout=30) as sock:
                sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                raw = b""
                while chunk := sock.recv(65536):
                    raw += chunk
            health.append(json.loads(raw.split(b"\r\n\r\n", 1)[1]).get("admission"))
        except (OSError, ValueError, IndexError):
            pass
    time.sleep(0.1)
json.dump({"probes": probes, "health": health}, open(out, "w"))
"""
"""Every 0.1 s, a ``POST /rollout`` on a new connection with a blocking socket, in its own
process (the bench's client loop is busy): how fast a refused admission is answered while
the server is under load, as the server gives it. Always the same id, so that it adds no
load: the first is admitted, the others get 429 (full: checked first) or 409 (duplicate).
Every second, ``/health``."""

OFFICIAL_SERVER = """
import os, sys
import uvicorn
sys.path.insert(0, os.path.dirname(sys.argv[1]))
from official_main import backend
from osmosis_ai.rollout.server import create_rollout_server

app = create_rollout_server(backend=backend, configure_logging=False,
                            api_key=os.environ.get("BENCH_API_KEY") or None)
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
            access_log=False, timeout_keep_alive=2160, backlog=4096)
"""

KEY = "bench-overload-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_up(url: str, proc: subprocess.Popen[bytes], headers: dict[str, str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server died: {proc.stderr.read().decode()[-3000:]}")  # type: ignore[union-attr]
        try:
            if httpx.get(url + "/health", headers=headers, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"server at {url} did not start")


def start(
    which: str,
    work: Path,
    max_concurrent: int,
    *,
    extra: tuple[str, ...] = (),
    fd_limit: int | None = None,
    api_key: str | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {
        **os.environ,
        **BASE_ENV,
        "BENCH_MAX_CONCURRENT": str(max_concurrent),
        "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(work / f"artifacts-{which}"),
        "OSMOSIS_API_KEY": "unused-llm-key",
    }

    def limit_files() -> None:
        if fd_limit is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    if which == "official":
        env["BENCH_API_KEY"] = api_key or ""
        argv = [official_python(), str(work / "official_server.py"), str(work / "x"), str(port)]
    else:
        script = Path(OURS_PYTHON).parent / "osmosis-rollout"
        argv = [str(script), "serve", "main.py:backend", "--port", str(port)]
        argv += ["--log-level", "warning", "--drain-timeout", "0", *extra]
        if api_key:
            argv += ["--api-key", api_key]
    proc = subprocess.Popen(
        argv,
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=limit_files,
    )
    url = f"http://127.0.0.1:{port}"
    wait_up(url, proc, {"Authorization": f"Bearer {api_key}"} if api_key else {})
    return proc, url


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.kill()
    proc.wait(timeout=30)


# -- overload -------------------------------------------------------------------------


async def offer(url: str, policy_url: str, load: int, deadline: float) -> dict[str, Any]:
    """Offer ``load`` rollouts at once; count answers and outcomes."""
    answers: Counter[int] = Counter()
    refused_ms: list[float] = []
    sent: dict[int, float] = {}

    async def on_request(request: httpx.Request) -> None:
        sent[id(request)] = time.perf_counter()

    async def on_response(response: httpx.Response) -> None:
        request = response.request
        if request.method == "POST" and request.url.path == "/rollout":
            answers[response.status_code] += 1
            if response.status_code == 429:
                refused_ms.append((time.perf_counter() - sent.pop(id(request))) * 1000)
            else:
                sent.pop(id(request), None)

    per_client = 64
    # Generous client timeouts: on a saturated machine this process's own loop can fall
    # behind, and a read it could not get to in time is not the server's failure.
    # Deadlines are the server's (agent_timeout_sec), and that is what is counted.
    clients = [
        RolloutClient(
            url,
            result_read_grace_sec=300.0,
            http_client=httpx.AsyncClient(
                timeout=httpx.Timeout(300.0),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=per_client),
                event_hooks={"request": [on_request], "response": [on_response]},
            ),
        )
        for _ in range(max(1, load // per_client))
    ]

    async def one(i: int) -> str:
        client = clients[i % len(clients)]
        try:
            handle = await client.run_rollout_async(
                initial_messages=[{"role": "user", "content": f"What is {i % 89 + 3} times 7?"}],
                chat_completions_url=policy_url,
                rollout_id=f"o-{i}",
                llm_api_key="unused-llm-key",
                label="x",
                agent_timeout_sec=deadline,
                grader_timeout_sec=30,
            )
            result = await handle
        except Exception as exc:  # a client-side failure: counted, not fatal
            return f"client:{type(exc).__name__}"
        if result.status.value == "success":
            return "success"
        return f"{result.status.value}:{result.err_category.value if result.err_category else ''}"

    t0 = time.perf_counter()
    tasks = [asyncio.create_task(one(i)) for i in range(load)]
    try:
        # A bound on the run: what has not finished by then is counted as unfinished.
        done, pending = await asyncio.wait(tasks, timeout=deadline * 6 + 120)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        outcomes = Counter(task.result() for task in done)
        outcomes["unfinished"] += len(pending)
    finally:
        for client in clients:
            await client.aclose()
    wall = time.perf_counter() - t0
    refused_ms.sort()
    return {
        "load": load,
        "admitted": answers[202],
        "refused": answers[429],
        "succeeded": outcomes["success"],
        "deadline": outcomes["failure:timeout"],
        "other": load - outcomes["success"] - outcomes["failure:timeout"],
        "wall": wall,
        "goodput": outcomes["success"] / wall,
        "p99_429_ms": refused_ms[int(0.99 * (len(refused_ms) - 1))] if refused_ms else None,
        "outcomes": dict(outcomes),
    }


def run_load(
    which: str,
    work: Path,
    policy_url: str,
    load: int,
    deadline: float,
    extra: tuple[str, ...],
    *,
    probe: bool = True,
) -> dict[str, Any]:
    proc, url = start(which, work, load, extra=extra)
    prober = None
    out = work / "probe.json"
    if probe:
        prober = subprocess.Popen(
            [OURS_PYTHON, str(work / "prober.py"), url.rsplit(":", 1)[1], policy_url, str(out)]
        )
    try:
        result = asyncio.run(offer(url, policy_url, load, deadline))
    finally:
        if prober is not None:
            prober.terminate()
            prober.wait(timeout=60)
        stop(proc)
    if prober is not None:
        data = json.loads(out.read_text())
        refused = sorted(ms for code, ms in data["probes"] if code == 429)
        result["probe_429"] = len(refused)
        result["probe_p99_ms"] = refused[int(0.99 * (len(refused) - 1))] if refused else None
        limits = [h["limit"] for h in data["health"] if h]
        lags = [h["loop_lag_sec"] for h in data["health"] if h]
        result["limit_max"] = max(limits) if limits else None
        result["lag_mean_ms"] = 1000 * sum(lags) / len(lags) if lags else None
    return result


# -- slowloris --------------------------------------------------------------------------


async def slowloris(url: str, slow: int, probes: int) -> dict[str, Any]:
    """Open ``slow`` half-sent requests without the key, then probe /health with it."""
    port = int(url.rsplit(":", 1)[1])
    writers: list[asyncio.StreamWriter] = []
    opened = 0
    for _ in range(slow):
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 2)
            writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            writers.append(writer)
            opened += 1
        except (OSError, TimeoutError):
            pass
    times: list[float] = []
    answered = 0
    for _ in range(probes):
        t0 = time.perf_counter()
        try:
            async with httpx.AsyncClient(
                headers={"Authorization": f"Bearer {KEY}"}, timeout=5
            ) as http:
                response = await http.get(url + "/health")
            if response.status_code == 200:
                answered += 1
        except httpx.HTTPError:
            pass
        times.append(time.perf_counter() - t0)
        # Keep the pressure on: the slow clients trickle a byte between probes.
        for writer in writers:
            if not writer.is_closing():
                writer.write(b"a")
        await asyncio.sleep(1)
    for writer in writers:
        writer.close()
    return {
        "opened": opened,
        "answered": answered,
        "under_1s": sum(t < 1.0 and i < answered for i, t in enumerate(times)),
        "slowest": max(times),
    }


def run_slowloris(which: str, work: Path, slow: int, fd_limit: int, probes: int) -> dict[str, Any]:
    proc, url = start(which, work, 64, fd_limit=fd_limit, api_key=KEY)
    try:
        return asyncio.run(slowloris(url, slow, probes))
    finally:
        stop(proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy-delay", type=float, default=2.0)
    parser.add_argument("--deadline", type=float, default=30.0)
    parser.add_argument("--calibrate", default="50,100,200,400")
    parser.add_argument("--capacity", type=int, default=None)
    parser.add_argument("--loads", default="0.5,1,2,4")
    parser.add_argument("--servers", default="ours,official")
    parser.add_argument("--slow", type=int, default=1100)
    parser.add_argument("--fd-limit", type=int, default=1024)
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--skip-slowloris", action="store_true")
    parser.add_argument("--skip-overload", action="store_true")
    args = parser.parse_args()
    servers = args.servers.split(",")
    print(machine())
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))

    with tempfile.TemporaryDirectory(prefix="bench-overload-") as tmp:
        work = Path(tmp)
        (work / "main.py").write_text(textwrap.dedent(WORKFLOW.format(sdk="osmosis_rollout")))
        (work / "official_main.py").write_text(
            textwrap.dedent(WORKFLOW.format(sdk="osmosis_ai.rollout"))
        )
        (work / "official_server.py").write_text(textwrap.dedent(OFFICIAL_SERVER))
        (work / "policy.py").write_text(POLICY)
        (work / "prober.py").write_text(PROBER)

        if not args.skip_overload:
            policy_port = free_port()
            policy = subprocess.Popen(
                [OURS_PYTHON, str(work / "policy.py"), str(policy_port), str(args.policy_delay)]
            )
            policy_url = f"http://127.0.0.1:{policy_port}/v1"
            time.sleep(1)
            try:
                overload(args, servers, work, policy_url)
            finally:
                policy.kill()
                policy.wait()

        if not args.skip_slowloris:
            rows = []
            for which in servers:
                r = run_slowloris(which, work, args.slow, args.fd_limit, args.probes)
                rows.append(
                    [
                        which,
                        r["opened"],
                        f"{r['answered']}/{args.probes}",
                        r["under_1s"],
                        round(r["slowest"], 3),
                    ]
                )
            print(
                f"\nslowloris: {args.slow} half-sent requests without the key at "
                f"{args.fd_limit} open files; /health with the key, {args.probes} probes"
            )
            print(table(["server", "slow conns opened", "answered", "< 1 s", "slowest s"], rows))


def overload(args: argparse.Namespace, servers: list[str], work: Path, policy_url: str) -> None:
    capacity = args.capacity
    if capacity is None:
        sweep = []
        for load in (int(x) for x in args.calibrate.split(",")):
            # The limit fixed at the load: ours admits everything, as the official does.
            r = run_load(
                "ours",
                work,
                policy_url,
                load,
                args.deadline,
                ("--max-concurrent", str(load)),
                probe=False,
            )
            sweep.append((load, r["goodput"]))
            print(
                f"calibration: {load} in flight -> {r['goodput']:.1f} rollouts/s "
                f"({r['succeeded']} ok, {r['deadline']} by deadline)",
                flush=True,
            )
        best = max(g for _, g in sweep)
        capacity = next(load for load, g in sweep if g >= 0.9 * best)
    print(f"capacity C = {capacity} rollouts in flight", flush=True)
    rows = []
    results: dict[tuple[str, float], dict[str, Any]] = {}
    for factor in (float(x) for x in args.loads.split(",")):
        load = max(1, round(capacity * factor))
        for which in servers:
            r = run_load(which, work, policy_url, load, args.deadline, ())
            results[(which, factor)] = r
            p99 = f"{r['p99_429_ms']:.0f}" if r["p99_429_ms"] is not None else "-"
            probe = f"{r['probe_p99_ms']:.0f}" if r.get("probe_p99_ms") is not None else "-"
            limit = r.get("limit_max") if which == "ours" else "-"
            rows.append(
                [
                    f"{which} {factor:g}C",
                    load,
                    r["admitted"],
                    r["refused"],
                    r["succeeded"],
                    r["deadline"],
                    r["other"],
                    round(r["wall"], 1),
                    round(r["goodput"], 1),
                    p99,
                    probe,
                    limit,
                ]
            )
            print(
                f"{which} {factor:g}C: {r['outcomes']} limit max {r.get('limit_max')} "
                f"mean lag {r.get('lag_mean_ms')} ms; row {rows[-1]}",
                flush=True,
            )
    print(
        f"\noverload: OpenAI Agents multiply rollout, {args.policy_delay:g} s per model call, "
        f"agent deadline {args.deadline:g} s, every rollout offered at once (C = {capacity})"
    )
    print(
        table(
            [
                "server load",
                "offered",
                "202",
                "429",
                "succeeded",
                "deadline miss",
                "other fail",
                "wall s",
                "goodput/s",
                "429 p99 ms",
                "probe 429 p99 ms",
                "max limit",
            ],
            rows,
        )
    )
    if "ours" in servers:
        peak = max(r["goodput"] for (w, _), r in results.items() if w == "ours")
        for (which, factor), r in sorted(results.items()):
            print(f"{which} {factor:g}C goodput / ours' peak: {r['goodput'] / peak:.2f}")


if __name__ == "__main__":
    main()
