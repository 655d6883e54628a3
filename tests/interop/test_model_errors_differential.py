"""A failing model call inside an integration, on ``osmosis-ai`` 0.3.8 and on ours (issue 34, 1).

One official-style snippet makes a rollout-scoped model call through each integration
(``OsmosisAgent`` + ``Runner.run``, ``OsmosisStrandsAgent``) against a policy endpoint on
loopback that injects a fault, once in the official venv and once in ours (imports
migrated). Each case gets its own endpoint per side, so the requests each side sent are
counted by the endpoint. What the user's code sees (the reply, or the exception's classes
from ``litellm``/``openai`` and its status) and the number of requests must be equal.

Strands turns a ``RateLimitError`` into its own throttling retries (seconds apart, six
times), the same on both sides as it is Strands' code: only its transient 429 and its
5xx are compared. Its calls carry no tools: the official venv's Strands fails every call
with tools before sending (an ``mcp`` release mismatch, see ``bench/_benchlib.py``).
"""

from __future__ import annotations

import json
import socket
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from interop_support import migrate_imports, run_snippet

from osmosis_rollout.controller import PolicyServer
from osmosis_rollout.policy import Faults

SNIPPET = """
import asyncio, json, os
os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
from agents import Runner
from osmosis_ai.rollout import RolloutContext
from osmosis_ai.rollout.integrations.agents.openai_agents import (
    OsmosisAgent, OsmosisMemorySession, OsmosisRolloutModel)
from osmosis_ai.rollout.integrations.agents.strands import OsmosisStrandsAgent
from osmosis_ai.rollout.integrations.agents.strands import (
    OsmosisRolloutModel as StrandsRolloutModel)

CASES = json.loads({cases!r})


async def ask(framework, url, key):
    with RolloutContext(chat_completions_url=url, api_key=key, rollout_id="r1"):
        if framework == "openai-agents":
            agent = OsmosisAgent(name="a", model=OsmosisRolloutModel())
            result = await Runner.run(agent, "Say hello.", session=OsmosisMemorySession())
            return str(result.final_output)
        agent = OsmosisStrandsAgent(model=StrandsRolloutModel(), callback_handler=None)
        return str(await agent.invoke_async("Say hello."))


async def observe(case):
    try:
        return {"reply": (await ask(case["framework"], case["url"], case["key"])).strip()}
    except Exception as exc:
        return {
            "raised": [
                f"{cls.__module__.split('.')[0]}.{cls.__name__}"
                for cls in type(exc).__mro__
                if cls.__module__.split(".")[0] in ("litellm", "openai")
            ],
            "status_code": getattr(exc, "status_code", None),
        }


async def main():
    return {name: await observe(case) for name, case in CASES.items()}

print(json.dumps(asyncio.run(main())))
"""

REPLY = "hello there"
CASES: dict[str, tuple[str, Faults | None]] = {
    "openai-agents: 429 then 200": ("openai-agents", Faults(fail_first=1, fail_status=429)),
    "openai-agents: 429 twice then 200": ("openai-agents", Faults(fail_first=2, fail_status=429)),
    "openai-agents: 429 every time": ("openai-agents", Faults(fail_first=99, fail_status=429)),
    "openai-agents: 500 every time": ("openai-agents", Faults(fail_first=99, fail_status=500)),
    "openai-agents: 503 every time": ("openai-agents", Faults(fail_first=99, fail_status=503)),
    "openai-agents: connection refused": ("openai-agents", None),
    "strands: 429 then 200": ("strands", Faults(fail_first=1, fail_status=429)),
    "strands: 500 every time": ("strands", Faults(fail_first=99, fail_status=500)),
}


def _refusing_url() -> str:
    """A loopback URL whose port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1/rollouts/r1"


def _observe(python: Path | str, source: str, cwd: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """What ``source`` saw for every case, and how many requests each case's endpoint got."""
    servers: dict[str, PolicyServer] = {}
    cases: dict[str, dict[str, str]] = {}
    try:
        for name, (framework, faults) in CASES.items():
            if faults is None:
                cases[name] = {"framework": framework, "url": _refusing_url(), "key": "k"}
                continue
            server = servers[name] = PolicyServer(REPLY, faults=faults).start()
            cases[name] = {
                "framework": framework,
                "url": server.rollout_url("r1"),
                "key": server.api_key,
            }
        seen = run_snippet(python, source.replace("{cases!r}", repr(json.dumps(cases))), cwd=cwd)
        counts = {name: len(server.log("r1").calls) for name, server in servers.items()}
    finally:
        for server in servers.values():
            server.stop()
    return seen, counts


@pytest.fixture(scope="module")
def observed(
    official_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[Any, Any]]]:
    """Per case: (official, ours), each ``(what the snippet saw, requests the endpoint got)``."""
    source = textwrap.dedent(SNIPPET)
    official = _observe(official_python, source, tmp_path_factory.mktemp("official"))
    ours = _observe(sys.executable, migrate_imports(source), tmp_path_factory.mktemp("ours"))
    yield {
        name: (
            (official[0][name], official[1].get(name)),
            (ours[0][name], ours[1].get(name)),
        )
        for name in CASES
    }


def test_a_transient_429_is_retried_and_answered_on_both(
    observed: dict[str, tuple[Any, Any]],
) -> None:
    for name in ("openai-agents: 429 then 200", "strands: 429 then 200"):
        official, ours = observed[name]
        assert official == ours, name
        assert REPLY in ours[0]["reply"]
        assert ours[1] == 2


def test_429_twice_then_200_is_three_requests_on_both(
    observed: dict[str, tuple[Any, Any]],
) -> None:
    official, ours = observed["openai-agents: 429 twice then 200"]
    assert official == ours
    assert REPLY in ours[0]["reply"]
    assert ours[1] == 3


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("openai-agents: 429 every time", "openai.RateLimitError"),
        ("openai-agents: 500 every time", "openai.InternalServerError"),
        ("openai-agents: 503 every time", "openai.APIStatusError"),
        ("strands: 500 every time", "openai.InternalServerError"),
    ],
)
def test_a_call_that_keeps_failing_raises_the_same_error_after_the_same_requests(
    observed: dict[str, tuple[Any, Any]], name: str, error: str
) -> None:
    official, ours = observed[name]
    assert official == ours
    assert error in ours[0]["raised"]
    assert ours[0]["raised"][0].startswith("litellm.")


def test_a_refused_connection_raises_the_same_error_on_both(
    observed: dict[str, tuple[Any, Any]],
) -> None:
    official, ours = observed["openai-agents: connection refused"]
    assert official == ours
    assert ours[0]["raised"][0].startswith("litellm.")
