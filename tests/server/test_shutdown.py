"""Lifespan exit: stop admitting, drain 10 s / cancel + 120 s / hard cancel, then backend.shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from server_support import (
    FAST,
    Gate,
    GatedWorkflow,
    admit,
    init_body,
    until_running,
)

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    LocalBackend,
)
from osmosis_rollout.server import DrainPolicy, create_rollout_server

SHORT = DrainPolicy(drain_sec=0.2, cancel_wait_sec=0.5, hard_cancel_wait_sec=0.5)


class RecordingBackend(LocalBackend):
    """A LocalBackend that notes when shutdown ran, and what was still running then."""

    def __init__(self, events: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.events = events

    async def shutdown(self) -> None:
        self.events.append(f"backend.shutdown running={self.limiter.running}")


def client_for(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t")


async def test_lifespan_exit_drains_rollouts_before_the_callers_lifespan_closes() -> None:
    events: list[str] = []

    @asynccontextmanager
    async def user_lifespan(app: FastAPI) -> AsyncIterator[None]:
        events.append("user.start")
        yield
        events.append("user.stop")

    backend = RecordingBackend(events, workflow=GatedWorkflow)
    app = create_rollout_server(backend=backend, lifespan=user_lifespan, drain=SHORT, **FAST)
    async with client_for(app) as client:
        async with app.router.lifespan_context(app):
            await admit(client, "r-1", metadata={"gate": "g"}, grade=False)
            await until_running(app, "r-1")
            asyncio.get_running_loop().call_later(0.05, Gate.get("g").set)
        entry = app.state.osmosis_server.registry
    assert events[0] == "user.start"
    assert events[-1] == "user.stop"
    assert "backend.shutdown running=0" in events
    assert events.index("backend.shutdown running=0") < events.index("user.stop")
    assert entry.entries == {} or all(e.finished for e in entry.entries.values())


async def test_lifespan_exit_cancels_rollouts_that_outlast_the_drain() -> None:
    app = create_rollout_server(backend=LocalBackend(workflow=GatedWorkflow), drain=SHORT, **FAST)
    server = app.state.osmosis_server
    async with client_for(app) as client, app.router.lifespan_context(app):
        await admit(client, "r-1", metadata={"gate": "never"})
        await until_running(app, "r-1")
        entry = server.registry.entries["r-1"]
    assert entry.result is not None
    assert entry.result["status"] == "cancelled"
    assert entry.result["err_message"] == "cancelled"
    assert entry.task is not None and entry.task.done()


async def test_rollouts_that_ignore_the_cancel_are_hard_cancelled(
    capsys: pytest.CaptureFixture[str],
) -> None:
    class Stubborn(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
            try:
                await Gate.get("never").wait()
            except asyncio.CancelledError:
                pass  # survive the registry cancel ...
            await Gate.get("never").wait()  # ... and give in to the hard cancel
            return None

    app = create_rollout_server(backend=LocalBackend(workflow=Stubborn), drain=SHORT, **FAST)
    server = app.state.osmosis_server
    async with client_for(app) as client, app.router.lifespan_context(app):
        await admit(client, "r-1")
        await until_running(app, "r-1")
    assert "forcing cancellation" in capsys.readouterr().out
    entry = server.registry.entries["r-1"]
    assert entry.result is not None and entry.result["status"] == "cancelled"


async def test_admission_during_shutdown_gets_503() -> None:
    app = create_rollout_server(backend=LocalBackend(workflow=GatedWorkflow), drain=SHORT, **FAST)
    responses: list[httpx.Response] = []
    async with client_for(app) as client:
        async with app.router.lifespan_context(app):
            await admit(client, "r-1", metadata={"gate": "g"}, grade=False)
            await until_running(app, "r-1")

            async def late_admission() -> None:
                await asyncio.sleep(0.05)  # the lifespan is exiting by now
                responses.append(await client.post("/rollout", json=init_body("r-2")))
                health = await client.get("/health")
                responses.append(health)
                Gate.get("g").set()

            task = asyncio.create_task(late_admission())
        await task
    assert responses[0].status_code == 503
    assert responses[0].json() == {"detail": "rollout server is shutting down"}
    assert responses[1].json()["lifecycle"]["accepting_rollouts"] is False


async def test_shutdown_stops_lease_watchers_and_retention_timers() -> None:
    app = create_rollout_server(backend=LocalBackend(workflow=GatedWorkflow), drain=SHORT, **FAST)
    server = app.state.osmosis_server
    async with client_for(app) as client, app.router.lifespan_context(app):
        await admit(client, "r-1", metadata={"gate": "g"}, grade=False)
        Gate.get("g").set()
    await asyncio.sleep(0)
    assert not server.registry._background
    assert all(
        lease.watcher is None or lease.watcher.done()
        for lease in server.registry.leases._leases.values()
    )


def test_drain_policy_rejects_negative_or_non_finite_stages() -> None:
    with pytest.raises(ValueError, match="drain_sec"):
        DrainPolicy(drain_sec=-1)
    with pytest.raises(ValueError, match="cancel_wait_sec"):
        DrainPolicy(cancel_wait_sec=float("inf"))


def test_the_default_drain_policy_matches_the_official_stages() -> None:
    assert DrainPolicy() == DrainPolicy(
        drain_sec=10.0, cancel_wait_sec=120.0, hard_cancel_wait_sec=10.0
    )
