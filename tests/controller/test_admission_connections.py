"""Admission over real sockets: a pooled connection the server closed, and a reset after
the server read the request (issue 13, defect 6).

A small asyncio HTTP/1.1 server on loopback plays the rollout server, so the client's
connection pool, keep-alive reuse and resets are real, not mocked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.errors import RolloutAdmissionUnknownError

MESSAGES = [{"role": "user", "content": "hi"}]
POLICY = "http://127.0.0.1:9/v1"

Plan = Callable[[int, int, str], str]
"""``(connection number, request number on it, request line) -> "answer" | "drop"``."""


@dataclass
class RawServer:
    """What the loopback server saw: request lines, per connection."""

    plan: Plan
    respond: Callable[[str, bytes], tuple[str, dict[str, object]]]
    seen: list[tuple[int, int, str]] = field(default_factory=list)
    connections: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        connection = self.connections
        number = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                number += 1
                lines = head.decode().split("\r\n")
                length = next(
                    (
                        int(v)
                        for k, _, v in (x.partition(": ") for x in lines)
                        if k.lower() == "content-length"
                    ),
                    0,
                )
                body = await reader.readexactly(length) if length else b""
                self.seen.append((connection, number, lines[0]))
                if self.plan(connection, number, lines[0]) == "drop":
                    writer.close()
                    return
                status, payload = self.respond(lines[0], body)
                data = json.dumps(payload).encode()
                writer.write(
                    f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


def answer(request_line: str, body: bytes) -> tuple[str, dict[str, object]]:
    method, path, _ = request_line.split(" ")
    if method == "POST" and path == "/rollout":
        rollout_id = json.loads(body)["rollout_id"]
        return "202 Accepted", {
            "rollout_id": rollout_id,
            "status": "queued",
            "polling_lease_token": "tok",
            "result_wait_timeout_sec": 1.0,
            "polling_lease_timeout_sec": 30.0,
        }
    if method == "GET" and path.endswith("/result"):
        rollout_id = path.split("/")[2]
        return "200 OK", {
            "rollout_id": rollout_id,
            "status": "failure",
            "sample": None,
            "err_message": "done",
            "err_category": "agent_error",
        }
    return "200 OK", {"status": "ok", "process_id": "p", "lifecycle": {}}


@asynccontextmanager
async def raw_server(
    plan: Plan, respond: Callable[[str, bytes], tuple[str, dict[str, object]]] | None = None
) -> AsyncIterator[tuple[str, RawServer]]:
    state = RawServer(plan, respond or answer)
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", state
    finally:
        server.close()
        await server.wait_closed()


async def test_a_post_on_a_pooled_connection_the_server_closed_is_resent() -> None:
    # Connection 1 serves /health, then drops the POST reused on it without answering:
    # the server closing an idle keep-alive connection just as the client reuses it.
    def plan(connection: int, number: int, line: str) -> str:
        return "drop" if connection == 1 and number == 2 else "answer"

    async with raw_server(plan) as (url, state), RolloutClient(url) as client:
        await client.health()
        handle = await client.run_rollout_async(MESSAGES, POLICY, "r1")
        result = await handle
    posts = [seen for seen in state.seen if seen[2].startswith("POST /rollout ")]
    assert [(c, n) for c, n, _ in posts] == [(1, 2), (2, 1)]
    assert result.rollout_id == "r1"


async def test_a_reset_after_the_server_read_a_fresh_post_is_settled_by_a_409() -> None:
    # The first POST (on a fresh connection) is read, then dropped: it may have admitted
    # the rollout. The re-POST is answered 409 below, so the client names the rollout.
    def plan(connection: int, number: int, line: str) -> str:
        return "drop" if connection == 1 else "answer"

    def conflict(request_line: str, body: bytes) -> tuple[str, dict[str, object]]:
        return "409 Conflict", {"detail": "rollout_id is already registered"}

    async with raw_server(plan, conflict) as (url, state), RolloutClient(url) as client:
        with pytest.raises(RolloutAdmissionUnknownError) as caught:
            await client.run_rollout_async(MESSAGES, POLICY, "r1")
    assert caught.value.rollout_id == "r1"
    assert len(state.seen) == 2
