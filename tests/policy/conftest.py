"""Fixtures for the policy endpoint tests: running servers and a stub OpenAI-compatible provider."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from _support.servers import uvicorn_thread
from fastapi import FastAPI, Request, Response

from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.policy import Faults

USER = {"role": "user", "content": "What is 2 + 3?"}

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        "strict": True,
    },
}
MUL_TOOL = {
    "type": "function",
    "function": {
        "name": "mul",
        "description": "Multiply two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


@pytest.fixture
def serve() -> Iterator[Callable[..., PolicyServer]]:
    """Start PolicyServers on loopback; every one is stopped at teardown."""
    started: list[PolicyServer] = []

    def start(policy: Any, *, faults: Faults | None = None, **kwargs: Any) -> PolicyServer:
        server = PolicyServer(policy, faults=faults, **kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@dataclass
class StubProvider:
    """A minimal OpenAI-compatible provider: records requests, answers JSON or SSE as asked.

    The first ``fail_first`` calls get HTTP ``fail_status`` with ``retry_after`` headers;
    ``latency_s`` delays every answer; ``arrivals`` (monotonic seconds), ``peers`` (the
    client's address of each call) and ``max_in_flight`` show how clients called it.
    """

    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    fail_first: int = 0
    fail_status: int = 429
    retry_after: dict[str, str] = field(default_factory=lambda: {"retry-after-ms": "10"})
    reply: dict[str, Any] = field(
        default_factory=lambda: {"role": "assistant", "content": "stub says hi"}
    )
    finish_reason: str = "stop"
    latency_s: float = 0.0
    calls: int = 0
    arrivals: list[float] = field(default_factory=list)
    peers: list[str] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def failure(self) -> Response | None:
        if self.calls > self.fail_first:
            return None
        kind = "rate_limit_error" if self.fail_status == 429 else "server_error"
        return Response(
            json.dumps({"error": {"message": "slow down", "type": kind, "code": self.fail_status}}),
            status_code=self.fail_status,
            media_type="application/json",
            headers=self.retry_after,
        )

    def answer(self, body: dict[str, Any]) -> Response:
        usage = {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return Response(
                "".join(self._chunks(body, usage if include_usage else None)),
                media_type="text/event-stream",
            )
        return Response(
            json.dumps(
                {
                    "id": f"chatcmpl-stub-{self.calls}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "stub"),
                    "choices": [
                        {"index": 0, "message": self.reply, "finish_reason": self.finish_reason}
                    ],
                    "usage": usage,
                }
            ),
            media_type="application/json",
        )

    def _chunks(self, body: dict[str, Any], usage: dict[str, int] | None) -> list[str]:
        base = {
            "id": f"chatcmpl-stub-{self.calls}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
        }

        def event(choices: list[dict[str, Any]], **extra: Any) -> str:
            return f"data: {json.dumps({**base, 'choices': choices, **extra})}\n\n"

        events = [event([{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}])]
        content = self.reply.get("content") or ""
        for piece in (content[: len(content) // 2], content[len(content) // 2 :]):
            if piece:
                events.append(
                    event([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
                )
        for index, call in enumerate(self.reply.get("tool_calls") or []):
            arguments = call["function"]["arguments"]
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            events.append(event([{"index": 0, "delta": {"tool_calls": [head]}}]))
            for piece in (arguments[:5], arguments[5:]):
                part = {"index": index, "function": {"arguments": piece}}
                events.append(event([{"index": 0, "delta": {"tool_calls": [part]}}]))
        events.append(event([{"index": 0, "delta": {}, "finish_reason": self.finish_reason}]))
        if usage is not None:
            events.append(event([], usage=usage))
        events.append("data: [DONE]\n\n")
        return events


@pytest.fixture
def stub_provider() -> Iterator[StubProvider]:
    """An OpenAI-compatible provider on loopback at ``stub.base_url`` (``.../v1``)."""
    stub = StubProvider()
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        stub.calls += 1
        stub.arrivals.append(time.monotonic())
        client = request.client
        stub.peers.append(f"{client.host}:{client.port}" if client else "?")
        body = await request.json()
        stub.requests.append(body)
        stub.headers.append(dict(request.headers))
        failure = stub.failure()
        if failure is not None:
            return failure
        stub.in_flight += 1
        stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
        try:
            if stub.latency_s:
                await asyncio.sleep(stub.latency_s)
            return stub.answer(body)
        finally:
            stub.in_flight -= 1

    with uvicorn_thread(app, lifespan="off", log_config=None, timeout_graceful_shutdown=1) as url:
        stub.base_url = f"{url}/v1"
        yield stub


def _parse_sse(text: str) -> list[tuple[str | None, str]]:
    """Split an SSE body into (event, data) pairs; comments are skipped."""
    events: list[tuple[str | None, str]] = []
    for block in text.split("\n\n"):
        event: str | None = None
        data: list[str] = []
        for line in block.splitlines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
        if data:
            events.append((event, "\n".join(data)))
    return events


@pytest.fixture
def parse_sse() -> Callable[[str], list[tuple[str | None, str]]]:
    """Split an SSE body into (event, data) pairs."""
    return _parse_sse


@pytest.fixture
def tools() -> dict[str, dict[str, Any]]:
    """Two OpenAI function tools, ``add`` (strict, as OpenAI Agents sends it) and ``mul``."""
    return {"add": ADD_TOOL, "mul": MUL_TOOL}
