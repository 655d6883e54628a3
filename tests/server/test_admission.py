"""POST /rollout: validation, 503/429/409 order, the 202 lease body, execution before the reply."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx
import pytest
from server_support import (
    Gate,
    GatedWorkflow,
    admit,
    eventually,
    init_body,
    lease,
    make_app,
    poll_until_terminal,
    serving,
)

from osmosis_rollout import (
    ExecutionBackend,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    LocalBackend,
    RolloutInitResponse,
    RolloutStatus,
)
from osmosis_rollout.server import create_rollout_server
from osmosis_rollout.server.app import _Server


class FullBackend(ExecutionBackend):
    """Never has capacity."""

    def __init__(self) -> None:
        self.executed: list[str] = []

    def has_capacity(self) -> bool:
        return False

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        self.executed.append(request.id)
        return ExecutionOutcome(workflow=ExecutionResult(status=RolloutStatus.SUCCESS))


async def test_admission_answers_202_with_a_valid_lease_body() -> None:
    async with serving(make_app()) as client:
        response = await client.post("/rollout", json=init_body("r-1"))
    assert response.status_code == 202
    body = response.json()
    assert set(body) == {
        "rollout_id",
        "status",
        "polling_lease_token",
        "result_wait_timeout_sec",
        "polling_lease_timeout_sec",
    }
    assert body["rollout_id"] == "r-1"
    assert body["status"] == "queued"
    assert len(body["polling_lease_token"]) >= 43  # urlsafe base64 of 32 bytes
    assert body["result_wait_timeout_sec"] == 0.5
    assert body["polling_lease_timeout_sec"] == 5.0
    RolloutInitResponse.model_validate(body)


async def test_default_timings_are_the_official_ones() -> None:
    app = make_app(result_wait_timeout_sec=30.0, polling_lease_timeout_sec=120.0)
    async with serving(app) as client:
        body = (await client.post("/rollout", json=init_body("r-1"))).json()
    assert (body["result_wait_timeout_sec"], body["polling_lease_timeout_sec"]) == (30.0, 120.0)


async def test_each_admission_mints_a_distinct_token() -> None:
    async with serving(make_app()) as client:
        tokens = {await admit(client, f"r-{i}") for i in range(5)}
    assert len(tokens) == 5


async def test_unknown_fields_such_as_old_callback_urls_are_ignored() -> None:
    async with serving(make_app()) as client:
        token = await admit(
            client,
            "r-1",
            completion_callback_url="http://old/cb",
            controller_api_key="k",
        )
        result = await poll_until_terminal(client, "r-1", token)
    assert result["status"] == "success"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"initial_messages": [], "chat_completions_url": "x"}, "rollout_id"),
        (init_body("r-1", llm_api_key=""), "llm_api_key"),
        (init_body("../x"), "single path segment"),
        (init_body("."), "single path segment"),
        (init_body("a\\b"), "single path segment"),
        ({"rollout_id": "r-1", "chat_completions_url": "x"}, "initial_messages"),
        (init_body("r-1", grade="maybe"), "grade"),
    ],
    ids=[
        "missing-rollout-id",
        "empty-llm-api-key",
        "dotdot-path",
        "dot",
        "backslash",
        "missing-messages",
        "non-bool-grade",
    ],
)
async def test_invalid_admission_bodies_get_422_with_a_message(
    body: dict[str, Any], needle: str
) -> None:
    async with serving(make_app()) as client:
        response = await client.post("/rollout", json=body)
        assert response.status_code == 422
        assert needle in response.text
        # Nothing was registered: the same id is still free.
        health = (await client.get("/health")).json()
    assert health["lifecycle"]["active_rollouts"] == 0


@pytest.mark.parametrize("field", ["agent_timeout_sec", "grader_timeout_sec"])
@pytest.mark.parametrize("literal", ["1e999", "-1e999"])
async def test_non_finite_timeouts_get_422_not_500(field: str, literal: str) -> None:
    # JSON has no NaN/Infinity; 1e999 is valid JSON that parses to inf.
    raw = (
        '{"initial_messages":[],"rollout_id":"r-1","chat_completions_url":"x",'
        f'"{field}":{literal}}}'
    )
    async with serving(make_app()) as client:
        response = await client.post(
            "/rollout", content=raw, headers={"content-type": "application/json"}
        )
    assert response.status_code == 422
    assert "finite" in response.json()["detail"][0]["msg"]


async def test_nan_literal_body_gets_422_not_500() -> None:
    raw = '{"initial_messages":[],"rollout_id":"r-1","chat_completions_url":"x","agent_timeout_sec":NaN}'
    async with serving(make_app()) as client:
        response = await client.post(
            "/rollout", content=raw, headers={"content-type": "application/json"}
        )
    assert response.status_code == 422


async def test_malformed_json_gets_422() -> None:
    async with serving(make_app()) as client:
        response = await client.post(
            "/rollout", content=b"{not json", headers={"content-type": "application/json"}
        )
    assert response.status_code == 422


async def test_a_lone_surrogate_in_a_rejected_body_does_not_break_the_422() -> None:
    raw = '{"initial_messages":[],"rollout_id":"a/\\ud800","chat_completions_url":"x"}'
    async with serving(make_app()) as client:
        response = await client.post(
            "/rollout", content=raw, headers={"content-type": "application/json"}
        )
    assert response.status_code == 422


async def test_full_backend_rejects_with_429_and_retry_after_5() -> None:
    backend = FullBackend()
    app = create_rollout_server(backend=backend, configure_logging=False)
    async with serving(app) as client:
        response = await client.post("/rollout", json=init_body("r-1"))
    assert response.status_code == 429
    assert response.json() == {"detail": "rollout queue is full; retry later"}
    assert response.headers["retry-after"] == "5"
    assert backend.executed == []


async def test_local_backend_queue_bound_turns_into_429() -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        workflow_config=None,
        max_queue_depth=1,
    )
    # LocalBackend's default is 4 slots; 4 running + 1 queued fills it.
    async with serving(app) as client:
        for i in range(5):
            await admit(client, f"r-{i}", metadata={"gate": "g"})
        await eventually(
            lambda: (
                app.state.osmosis_backend.limiter.queued == 1
                and app.state.osmosis_backend.limiter.running == 4
            )
        )
        refused = await client.post("/rollout", json=init_body("r-5", metadata={"gate": "g"}))
        Gate.get("g").set()
    assert refused.status_code == 429


async def test_a_burst_admitted_in_one_go_counts_against_the_queue_bound() -> None:
    # Rollouts admitted in the same burst have not reached the limiter yet; they must
    # still count, or a burst of 50 against 4 slots + 2 queued admits far more than 6.
    app = make_app(workflow=GatedWorkflow, grader=None, max_queue_depth=2)
    async with serving(app) as client:
        responses = await asyncio.gather(
            *(
                client.post("/rollout", json=init_body(f"b-{i}", metadata={"gate": "g"}))
                for i in range(50)
            )
        )
        codes = [response.status_code for response in responses]
        assert codes.count(202) == 6, codes
        assert codes.count(429) == 44, codes
        assert all(r.headers["retry-after"] == "5" for r in responses if r.status_code == 429)
        backend = app.state.osmosis_backend
        await eventually(lambda: backend.limiter.running == 4 and backend.limiter.queued == 2)
        Gate.get("g").set()


async def test_create_rollout_server_sets_the_queue_bound_of_a_local_backend() -> None:
    backend = LocalBackend(workflow=GatedWorkflow)
    app = create_rollout_server(backend=backend, configure_logging=False, max_queue_depth=0)
    assert backend.max_queue_depth == 0
    async with serving(app) as client:
        responses = await asyncio.gather(
            *(
                client.post("/rollout", json=init_body(f"z-{i}", metadata={"gate": "g"}))
                for i in range(10)
            )
        )
        Gate.get("g").set()
    assert [r.status_code for r in responses].count(202) == 4


async def test_a_cancelled_reservation_frees_its_place_in_the_queue() -> None:
    app = make_app(workflow=GatedWorkflow, grader=None, max_queue_depth=0)
    async with serving(app) as client:
        for i in range(4):
            await admit(client, f"c-{i}", metadata={"gate": "g"})
        await client.post("/rollout/cancel", json={"ids": ["c-0"]})
        await eventually(lambda: app.state.osmosis_backend.limiter.running == 3)
        again = await client.post("/rollout", json=init_body("c-4", metadata={"gate": "g"}))
        Gate.get("g").set()
    assert again.status_code == 202, again.text


def test_max_queue_depth_needs_a_backend_that_bounds_its_queue() -> None:
    with pytest.raises(TypeError, match="max_queue_depth"):
        create_rollout_server(backend=FullBackend(), max_queue_depth=3)


async def test_backend_with_capacity_accepts() -> None:
    async with serving(make_app()) as client:
        response = await client.post("/rollout", json=init_body("r-1"))
    assert response.status_code == 202


async def test_live_id_is_refused_with_409() -> None:
    async with serving(make_app(workflow=GatedWorkflow, grader=None)) as client:
        await admit(client, "r-1", metadata={"gate": "g"})
        again = await client.post("/rollout", json=init_body("r-1", metadata={"gate": "g"}))
        Gate.get("g").set()
    assert again.status_code == 409
    assert again.json() == {"detail": "rollout_id is already registered"}


async def test_capacity_is_checked_before_duplicate_ids() -> None:
    backend = FullBackend()
    app = create_rollout_server(backend=backend, configure_logging=False)
    # Register an id through the registry directly, then the backend is full: 429 wins.
    async with serving(app) as client:
        server: _Server = app.state.osmosis_server
        await server.registry.register("r-1")
        response = await client.post("/rollout", json=init_body("r-1"))
    assert response.status_code == 429


async def test_shutdown_is_checked_before_capacity() -> None:
    app = create_rollout_server(backend=FullBackend(), configure_logging=False)
    async with serving(app) as client:
        server: _Server = app.state.osmosis_server
        server.accepting = False
        response = await client.post("/rollout", json=init_body("r-1"))
    assert response.status_code == 503
    assert response.json() == {"detail": "rollout server is shutting down"}


async def test_execution_task_exists_before_the_202_is_sent() -> None:
    """Drive the ASGI app by hand and fail the response send: the rollout still runs."""
    app = make_app()
    server: _Server = app.state.osmosis_server
    body = httpx.Request("POST", "http://t/rollout", json=init_body("r-1")).content
    seen_tasks: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            seen_tasks.append(len(server.tasks))
            raise OSError("connection reset by peer")

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/rollout",
        "raw_path": b"/rollout",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"host", b"t")],
        "client": ("127.0.0.1", 1),
        "server": ("t", 80),
        "state": {},
    }
    async with app.router.lifespan_context(app):
        with pytest.raises(OSError):
            await app(scope, receive, send)
        assert seen_tasks and seen_tasks[0] >= 0
        entry = server.registry.entries["r-1"]
        assert entry.task is not None
        await asyncio.wait({entry.task}, timeout=5)
        assert entry.result is not None and entry.result["status"] == "success"


async def test_after_a_lost_202_the_rollout_ends_by_lease_expiry() -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        result_wait_timeout_sec=0.05,
        polling_lease_timeout_sec=0.2,
    )
    async with serving(app) as client:
        await client.post("/rollout", json=init_body("r-1", metadata={"gate": "never"}))
        server: _Server = app.state.osmosis_server
        entry = server.registry.entries["r-1"]
        await eventually(lambda: entry.finished)
        assert entry.task is not None
        await asyncio.wait({entry.task}, timeout=5)
    assert entry.result is not None
    assert entry.result["err_category"] == "lease_expired"
    assert entry.task.cancelled()


def test_the_result_model_timeouts_are_finite() -> None:
    assert math.isfinite(make_app().state.osmosis_server.registry.leases.timeout_sec)


async def test_poll_after_admission_reads_lease_header() -> None:
    async with serving(make_app()) as client:
        token = await admit(client, "r-1")
        response = await client.get("/rollout/r-1/result", headers=lease(token))
    assert response.status_code == 200
