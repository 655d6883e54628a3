"""Fixtures for the policy endpoint tests: running servers and a stub OpenAI-compatible provider."""

from __future__ import annotations

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
    """A minimal OpenAI-compatible provider: records requests, answers from a queue."""

    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    fail_first: int = 0
    fail_status: int = 429
    reply: dict[str, Any] = field(
        default_factory=lambda: {"role": "assistant", "content": "stub says hi"}
    )
    finish_reason: str = "stop"
    calls: int = 0

    def answer(self, body: dict[str, Any]) -> Response:
        self.calls += 1
        if self.calls <= self.fail_first:
            return Response(
                json.dumps(
                    {"error": {"message": "slow down", "type": "rate_limit_error", "code": "429"}}
                ),
                status_code=self.fail_status,
                media_type="application/json",
                headers={"retry-after-ms": "10"},
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
                    "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
                }
            ),
            media_type="application/json",
        )


@pytest.fixture
def stub_provider() -> Iterator[StubProvider]:
    """An OpenAI-compatible provider on loopback at ``stub.base_url`` (``.../v1``)."""
    stub = StubProvider()
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        body = await request.json()
        stub.requests.append(body)
        stub.headers.append(dict(request.headers))
        return stub.answer(body)

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
