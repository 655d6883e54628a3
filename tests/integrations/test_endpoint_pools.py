"""The rollout clients' transport spreads calls in flight over bounded pools.

A real uvicorn server on loopback holds each streamed reply open until released, so the
calls are in flight together; the server records each request's client port (its
connection).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import pytest
from integrations.support import serve_rollout_app

from osmosis_rollout.transport.connection_pools import pool_sizes, pooled_transport


class HeldReplies:
    """Answers each request with one body part, then the rest once ``release`` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.ports: list[int] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                kind = message["type"].rsplit(".", 1)[1]
                await send({"type": f"lifespan.{kind}.complete"})
                if kind == "shutdown":
                    return
        if scope["type"] != "http":
            return
        self.ports.append(scope["client"][1])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        await self.release.wait()
        await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})


def _transport() -> Any:
    """What the rollout clients use: pools of 16 connections, 32 in all."""

    def pool(size: int) -> httpx.AsyncHTTPTransport:
        return httpx.AsyncHTTPTransport(limits=httpx.Limits(max_connections=size))

    return pooled_transport(httpx, pool, pool_sizes(32))


def _client(transport: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=transport, timeout=10)


async def test_calls_beyond_a_pools_share_go_to_another_pool_and_a_closed_reply_frees_its_place() -> (
    None
):
    app = HeldReplies()
    transport = _transport()
    async with serve_rollout_app(app) as url, _client(transport) as client:
        async with contextlib.AsyncExitStack() as stack:
            replies = [
                await stack.enter_async_context(client.stream("POST", url + "/v1/chat"))
                for _ in range(20)
            ]
            assert transport.loads == [16, 4]
            app.release.set()
            for reply in replies:
                await reply.aread()
        assert transport.loads == [0, 0]
        first_pool_ports = set(app.ports[:16])
        app.ports.clear()
        async with client.stream("POST", url + "/v1/chat") as reply:
            assert transport.loads == [1, 0]
            await reply.aread()
    assert app.ports[0] in first_pool_ports, "the next call did not reuse a pooled connection"


async def test_a_call_that_fails_gives_its_place_back() -> None:
    transport = _transport()
    async with _client(transport) as client:
        with pytest.raises(httpx.ConnectError):
            await client.post("http://127.0.0.1:9/v1/chat")
    assert transport.loads == [0]
