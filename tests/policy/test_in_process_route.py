"""The in-process route to a policy endpoint: loopback's bytes, on the caller's own loop.

Each endpoint's app is wrapped in a wire tap that records every exchange as the app sees
it (path, headers, request body bytes, status, reply body bytes) and the thread that ran it.
The same rollouts run against an endpoint served on loopback and one started with
``in_process=True``: the integrations must send and receive the same bytes (reply ids and
timestamps aside), and the routed calls must run on the test's own thread.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import respx
from agents import ModelSettings, Runner, function_tool
from openai import AsyncOpenAI

from osmosis_rollout.chat_client import RolloutChatClient, _shared_client
from osmosis_rollout.context import RolloutContext
from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.errors import PolicyError
from osmosis_rollout.integrations.agents.openai_agents import (
    OsmosisAgent,
    OsmosisMemorySession,
    OsmosisRolloutModel,
)
from osmosis_rollout.policy import ChatRequest, Faults, RecordingPolicy, Text, ToolCall
from osmosis_rollout.transport.in_process import route_for

PROMPT = [{"role": "user", "content": "What is 6 times 7? Answer in één sentence."}]
MULTIPLY_SPEC = {
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
}
KEY = "test-key-shared-by-both-endpoints"
TEXT = "A reply long enough to be streamed over several content chunks, as models do."


def multiply_policy(request: ChatRequest) -> Any:
    """Call multiply(6, 7), then report the tool's result."""
    results = [m for m in request.messages if m.get("role") == "tool"]
    if not results:
        return ToolCall("multiply", {"a": 6, "b": 7}, id="call_mul_1")
    return Text(f"The product is {results[-1]['content']}, één answer.")


@dataclass
class Exchange:
    path: str
    headers: dict[str, str]
    request: bytes
    status: int
    reply: bytes
    thread: int


class WireTap:
    """ASGI middleware: record each HTTP exchange as the app sees it."""

    def __init__(self, app: Any, log: list[Exchange]) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body = bytearray()
        reply = bytearray()
        status: list[int] = []

        async def tapped_receive() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
            return message

        async def tapped_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            elif message["type"] == "http.response.body":
                reply.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, tapped_receive, tapped_send)
        finally:
            headers = {k.decode(): v.decode() for k, v in scope["headers"]}
            self.log.append(
                Exchange(
                    scope["path"],
                    headers,
                    bytes(body),
                    status[0] if status else 0,
                    bytes(reply),
                    threading.get_ident(),
                )
            )


async def logged(wire: list[Exchange], count: int) -> list[Exchange]:
    """``wire`` once it holds ``count`` exchanges: a loopback server's tap logs an exchange
    after the reply's last byte went out, so the caller can be done before it is logged."""
    async with asyncio.timeout(10):
        while len(wire) < count:
            await asyncio.sleep(0.01)
    return wire


def normalised(data: bytes) -> bytes:
    """Reply bytes without what differs on every call (completion id, creation time)."""
    data = re.sub(rb'"chatcmpl-[0-9a-f]+"', b'"chatcmpl-ID"', data)
    return re.sub(rb'"created":\d+', b'"created":0', data)


@pytest.fixture
def endpoint() -> Iterator[Callable[..., tuple[PolicyServer, list[Exchange]]]]:
    """Start tapped PolicyServers (``in_process`` or loopback only); stopped at teardown."""
    started: list[PolicyServer] = []

    def start(
        policy: Any, *, in_process: bool, faults: Faults | None = None
    ) -> tuple[PolicyServer, list[Exchange]]:
        server = PolicyServer(policy, in_process=in_process, faults=faults, api_key=KEY)
        log: list[Exchange] = []
        server.app.add_middleware(WireTap, log=log)
        started.append(server.start())
        return server, log

    yield start
    for server in started:
        server.stop()


def context(server: PolicyServer, streaming: bool, rollout_id: str = "r1") -> RolloutContext:
    ctx = RolloutContext(
        chat_completions_url=server.rollout_url(rollout_id),
        api_key=server.api_key,
        rollout_id=rollout_id,
    )
    ctx.streaming = streaming  # type: ignore[attr-defined]
    return ctx


async def chat_client_rollout(server: PolicyServer, streaming: bool) -> Any:
    """The plain-chat two-call loop: tool call, tool result, final answer."""
    with context(server, streaming):
        chat = RolloutChatClient(PROMPT, tools=[MULTIPLY_SPEC], temperature=1.0, max_tokens=256)
        reply = await chat.complete()
        for call in reply.tool_calls:
            args = json.loads(call["function"]["arguments"])
            chat.add_tool_result(call["id"], str(args["a"] * args["b"]))
        await chat.complete()
        return (await chat.get_sample()).trajectory_messages


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


async def openai_agents_rollout(server: PolicyServer, streaming: bool) -> Any:
    """The OpenAI Agents multiply rollout (lean endpoint client under OsmosisRolloutModel)."""
    with context(server, streaming):
        agent = OsmosisAgent(
            name="multiply-agent",
            instructions="Use the multiply tool when arithmetic is required.",
            model=OsmosisRolloutModel(),
            model_settings=ModelSettings(temperature=1.0, max_tokens=256),
            tools=[multiply],
        )
        session = OsmosisMemorySession()
        result = await Runner.run(agent, PROMPT, session=session)
        items = await session.get_items()
        return [result.final_output, [dict(item) for item in items]]


ROLLOUTS = {"chat_client": chat_client_rollout, "openai_agents": openai_agents_rollout}


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("rollout", sorted(ROLLOUTS))
async def test_routed_rollouts_send_and_receive_the_loopback_bytes(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]], rollout: str, streaming: bool
) -> None:
    loopback, loopback_wire = endpoint(multiply_policy, in_process=False)
    routed, routed_wire = endpoint(multiply_policy, in_process=True)

    expected = await ROLLOUTS[rollout](loopback, streaming)
    got = await ROLLOUTS[rollout](routed, streaming)

    assert normalised(json.dumps(got, default=str).encode()) == normalised(
        json.dumps(expected, default=str).encode()
    )
    await logged(loopback_wire, 2)
    assert len(routed_wire) == len(loopback_wire) == 2
    for ours, theirs in zip(routed_wire, loopback_wire, strict=True):
        assert ours.path == theirs.path
        assert ours.request == theirs.request
        assert {k: v for k, v in ours.headers.items() if k != "host"} == {
            k: v for k, v in theirs.headers.items() if k != "host"
        }
        assert ours.status == theirs.status == 200
        assert normalised(ours.reply) == normalised(theirs.reply)
    assert (b"data: [DONE]" in routed_wire[0].reply) is streaming
    here = threading.get_ident()
    assert {exchange.thread for exchange in routed_wire} == {here}
    assert here not in {exchange.thread for exchange in loopback_wire}


async def test_a_caller_with_its_own_client_is_served_on_loopback(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]],
) -> None:
    server, wire = endpoint(TEXT, in_process=True)
    assert route_for(server.rollout_url("r1")) is not None
    async with AsyncOpenAI(base_url=server.rollout_url("r1"), api_key=server.api_key) as client:
        completion = await client.chat.completions.create(model="osmosis-rollout", messages=PROMPT)
    assert completion.choices[0].message.content == TEXT
    assert (await logged(wire, 1))[0].thread != threading.get_ident()
    assert server.log("r1").n_calls == 1


async def test_stop_removes_the_route_and_loopback_callers_are_refused(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]],
) -> None:
    server, _ = endpoint(TEXT, in_process=True)
    url = server.rollout_url("r1") + "/chat/completions"
    server.stop()
    assert route_for(url) is None
    with pytest.raises(httpx.ConnectError):
        await _shared_client().post(url, json={"messages": PROMPT})


async def test_a_failing_status_reaches_the_routed_client_then_calls_succeed(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]],
) -> None:
    server, _ = endpoint(TEXT, in_process=True, faults=Faults(fail_first=1, fail_status=429))
    with context(server, streaming=False):
        chat = RolloutChatClient(PROMPT)
        with pytest.raises(PolicyError, match="HTTP 429"):
            await chat.complete()
        reply = await chat.complete()
    assert reply.content == TEXT
    assert [call.status_code for call in server.log("r1").calls] == [429, 200]


async def test_a_cut_stream_breaks_the_routed_client_mid_body(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]],
) -> None:
    server, _ = endpoint(TEXT, in_process=True, faults=Faults(cut_stream=True))
    received: list[str] = []
    body = {"model": "osmosis-rollout", "messages": PROMPT, "stream": True}
    headers = {"Authorization": f"Bearer {server.api_key}"}
    url = server.rollout_url("r1") + "/chat/completions"
    async with _shared_client().stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200
        with pytest.raises(httpx.RemoteProtocolError):
            async for line in response.aiter_lines():
                received.append(line)
    assert any(line.startswith("data: {") for line in received), "some events arrive first"
    assert "data: [DONE]" not in received


async def test_a_malformed_chunk_fails_the_routed_client_parse(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]],
) -> None:
    server, _ = endpoint(TEXT, in_process=True, faults=Faults(malformed_chunk=True))
    with context(server, streaming=True):
        chat = RolloutChatClient(PROMPT)
        with pytest.raises(PolicyError, match="bad JSON"):
            await chat.complete()


async def test_a_hang_outlasts_the_routed_read_timeout(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]],
) -> None:
    server, _ = endpoint(TEXT, in_process=True, faults=Faults(hang_s=60, only_calls=frozenset({1})))
    url = server.rollout_url("r1") + "/chat/completions"
    headers = {"Authorization": f"Bearer {server.api_key}"}
    client = _shared_client()
    with pytest.raises(httpx.ReadTimeout):
        await client.post(url, json={"messages": PROMPT}, headers=headers, timeout=0.3)
    answered = await client.post(url, json={"messages": PROMPT}, headers=headers)
    assert answered.json()["choices"][0]["message"]["content"] == TEXT


async def test_respx_mocks_see_routed_requests(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]],
) -> None:
    server, wire = endpoint(TEXT, in_process=True)
    url = server.rollout_url("r1") + "/chat/completions"
    with respx.mock(assert_all_called=True) as router:
        router.post(url).mock(return_value=httpx.Response(503, text="provider overloaded"))
        with context(server, streaming=False):
            chat = RolloutChatClient(PROMPT)
            with pytest.raises(PolicyError, match=r"HTTP 503.*provider overloaded"):
                await chat.complete()
    assert wire == []
    assert server.log("r1").n_calls == 0


async def test_cassettes_record_and_replay_through_the_route(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]], tmp_path: Path
) -> None:
    calls: list[int] = []

    def counting(request: ChatRequest) -> Any:
        calls.append(1)
        return multiply_policy(request)

    recorder, _ = endpoint(RecordingPolicy(counting, tmp_path, "once"), in_process=True)
    recorded = await chat_client_rollout(recorder, streaming=True)
    assert len(calls) == 2
    assert list(tmp_path.rglob("*.json")), "the cassette was written"

    replayer, wire = endpoint(RecordingPolicy(None, tmp_path, "none"), in_process=True)
    replayed = await chat_client_rollout(replayer, streaming=True)
    assert replayed == recorded
    assert len(calls) == 2, "replay never calls the recorded policy"
    assert {exchange.thread for exchange in wire} == {threading.get_ident()}


async def test_openai_client_on_the_routed_transport_sees_injected_errors(
    endpoint: Callable[..., tuple[PolicyServer, list[Exchange]]],
) -> None:
    server, wire = endpoint(TEXT, in_process=True, faults=Faults(fail_first=1, fail_status=500))
    client = AsyncOpenAI(
        base_url=server.rollout_url("r1"),
        api_key=server.api_key,
        max_retries=0,
        http_client=_shared_client(),
    )
    with pytest.raises(openai.APIStatusError) as caught:
        await client.chat.completions.create(model="osmosis-rollout", messages=PROMPT)
    assert caught.value.status_code == 500
    assert wire[0].thread == threading.get_ident()
