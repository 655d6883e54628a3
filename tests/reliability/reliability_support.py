"""Helpers for the reliability suite (imported as ``reliability_support``; the folder's
conftest puts it on ``sys.path``): loopback uvicorn, a flaky-poll transport, workflows."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import httpx
from _support.net import free_port as free_port
from _support.servers import uvicorn_thread as uvicorn_thread

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    Grader,
    GraderContext,
)

TERMINAL = frozenset({"success", "failure", "cancelled"})


class FlakyPollTransport(httpx.AsyncBaseTransport):
    """An httpx transport standing between the controller and the server (a loopback proxy).

    Result polls (``GET .../result``) are dropped with probability ``drop_rate``: answered
    ``503`` by the "proxy", reset before reaching the server, or reset after the server
    answered (the response is lost, so the server has renewed the lease or even served the
    terminal result once). Polls that pass are delayed by up to ``max_delay_s``. Other
    requests pass untouched.

    ``max_burst`` caps consecutive drops per rollout: the client's documented budget (the
    protocol's controller side) is 2 transport retries and 6 gateway retries per read, so a
    burst of at most 2 drops is always recoverable; longer bursts test the budget, not
    reliability.
    """

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        *,
        drop_rate: float = 0.3,
        max_burst: int = 2,
        max_delay_s: float = 0.02,
        seed: int = 0,
    ) -> None:
        self.inner = inner
        self.drop_rate = drop_rate
        self.max_burst = max_burst
        self.max_delay_s = max_delay_s
        self.rng = random.Random(seed)
        self.bursts: Counter[str] = Counter()
        self.polls = 0
        self.dropped: Counter[str] = Counter()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if request.method != "GET" or not path.endswith("/result"):
            return await self.inner.handle_async_request(request)
        self.polls += 1
        rollout_id = path.split("/")[-2]
        if self.bursts[rollout_id] < self.max_burst and self.rng.random() < self.drop_rate:
            self.bursts[rollout_id] += 1
            kind = self.rng.choice(("503", "reset_before", "reset_after"))
            self.dropped[kind] += 1
            if kind == "503":
                return httpx.Response(503, json={"detail": "proxy: upstream unavailable"})
            if kind == "reset_before":
                raise httpx.ReadError("proxy: connection reset by peer", request=request)
            response = await self.inner.handle_async_request(request)
            await response.aread()
            await response.aclose()
            raise httpx.RemoteProtocolError(
                "proxy: peer closed connection without sending a complete response",
                request=request,
            )
        self.bursts[rollout_id] = 0
        delay = self.rng.uniform(0, self.max_delay_s)
        if delay:
            await asyncio.sleep(delay)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class MultiplyWorkflow(AgentWorkflow[Any]):
    """Multiplies the two integers of the prompt ``"a*b"``; sleeps ``metadata['sleep']``."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        delay = float((ctx.metadata or {}).get("sleep", 0))
        if delay:
            await asyncio.sleep(delay)
        a, b = (int(x) for x in str(ctx.prompt[-1]["content"]).split("*"))
        return [*ctx.prompt, {"role": "assistant", "content": str(a * b)}]


class ExactGrader(Grader):
    """Reward 1.0 when the last message equals the label, else 0.0."""

    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        ctx.set_reward(1.0 if ctx.sample.messages[-1]["content"] == ctx.label else 0.0)
