"""Helpers for the rollout server tests (imported as ``server_support``; conftest puts this
folder on ``sys.path``): plain workflows, an in-process client, loopback uvicorn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from _support.net import free_port as free_port
from _support.servers import uvicorn_thread as uvicorn_thread
from fastapi import FastAPI

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    Grader,
    GraderContext,
    LocalBackend,
)
from osmosis_rollout.server import create_rollout_server
from osmosis_rollout.types import NOTES_HEADER, POLLING_LEASE_HEADER

FAST = {
    "result_wait_timeout_sec": 0.5,
    "polling_lease_timeout_sec": 5.0,
    "result_retention_sec": 60.0,
    "configure_logging": False,
}
"""Short server timings for tests."""

TERMINAL = {"success", "failure", "cancelled"}


class EchoWorkflow(AgentWorkflow[Any]):
    """Answers with the last prompt message's content, reversed; sleeps ``metadata['sleep']``."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        delay = (ctx.metadata or {}).get("sleep", 0)
        if delay:
            await asyncio.sleep(delay)
        text = str(ctx.prompt[-1]["content"]) if ctx.prompt else ""
        return [*ctx.prompt, {"role": "assistant", "content": text[::-1]}]


class ExactGrader(Grader):
    """Reward 1.0 when the last message equals the label, else 0.0."""

    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.sample is not None
        last = ctx.sample.messages[-1]["content"] if ctx.sample.messages else None
        ctx.set_reward(1.0 if last == ctx.label else 0.0)


class Gate:
    """An event a workflow waits on, shared through the test (module-global registry)."""

    events: dict[str, asyncio.Event] = {}

    @classmethod
    def get(cls, name: str) -> asyncio.Event:
        return cls.events.setdefault(name, asyncio.Event())


class GatedWorkflow(AgentWorkflow[Any]):
    """Blocks until the gate named by ``metadata['gate']`` opens, then answers ``"done"``."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        await Gate.get((ctx.metadata or {})["gate"]).wait()
        return [{"role": "assistant", "content": "done"}]


def init_body(rollout_id: str, **overrides: Any) -> dict[str, Any]:
    """A valid ``POST /rollout`` body."""
    body: dict[str, Any] = {
        "initial_messages": [{"role": "user", "content": "abc"}],
        "rollout_id": rollout_id,
        "chat_completions_url": "http://127.0.0.1:9/v1",
        "label": "cba",
    }
    body.update(overrides)
    return body


def lease(token: str) -> dict[str, str]:
    """The lease header for ``token``."""
    return {POLLING_LEASE_HEADER: token}


@asynccontextmanager
async def serving(app: FastAPI, **client_kwargs: Any) -> AsyncIterator[httpx.AsyncClient]:
    """Run ``app``'s lifespan and yield an in-process client (ASGITransport skips lifespan)."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://rollout.test", timeout=10, **client_kwargs
        ) as client:
            yield client


async def admit(client: httpx.AsyncClient, rollout_id: str, **overrides: Any) -> str:
    """Admit ``rollout_id`` (expecting 202) and return its lease token."""
    response = await client.post("/rollout", json=init_body(rollout_id, **overrides))
    assert response.status_code == 202, response.text
    token: str = response.json()["polling_lease_token"]
    return token


async def poll_until_terminal(
    client: httpx.AsyncClient,
    rollout_id: str,
    token: str,
    *,
    limit: int = 40,
    notes: bool = False,
) -> dict[str, Any]:
    """Long-poll until a terminal result (asking for its ``notes`` as our controller does,
    with ``notes``); fail after ``limit`` polls."""
    headers = {**lease(token), **({NOTES_HEADER: "1"} if notes else {})}
    for _ in range(limit):
        response = await client.get(f"/rollout/{rollout_id}/result", headers=headers)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        if body["status"] in TERMINAL:
            return body
    raise AssertionError(f"rollout {rollout_id} did not finish within {limit} polls")


def make_app(
    workflow: type[AgentWorkflow[Any]] = EchoWorkflow,
    grader: type[Grader] | None = ExactGrader,
    **kwargs: Any,
) -> FastAPI:
    """A server over a LocalBackend, with test timings unless overridden."""
    backend_kwargs = {
        k: kwargs.pop(k) for k in ("workflow_config", "max_queue_depth") if k in kwargs
    }
    backend = kwargs.pop("backend", None) or LocalBackend(
        workflow=workflow, grader=grader, **backend_kwargs
    )
    return create_rollout_server(backend=backend, **{**FAST, **kwargs})


Predicate = Callable[[], bool]


async def eventually(predicate: Predicate, *, timeout: float = 5.0) -> None:
    """Wait (bounded) until ``predicate()`` holds."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def until_running(app: FastAPI, rollout_id: str) -> None:
    """Wait until the server reports ``rollout_id`` as running (its task has started)."""
    registry = app.state.osmosis_server.registry
    await eventually(
        lambda: (
            rollout_id in registry.entries
            and registry.entries[rollout_id].progress.status == "running"
        )
    )
