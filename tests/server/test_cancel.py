"""POST /rollout/cancel: one selector, dispositions, repeat cancels, backend-owned cancels."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from server_support import (
    Gate,
    GatedWorkflow,
    admit,
    eventually,
    lease,
    make_app,
    poll_until_terminal,
    serving,
    until_running,
)

from osmosis_rollout import (
    ExecutionBackend,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    RolloutStatus,
)
from osmosis_rollout.server import create_rollout_server
from osmosis_rollout.server.app import _Server
from osmosis_rollout.server.registry import RolloutRegistry

SELECTOR_ERROR = {"detail": "pass exactly one selector: ids, prefix, or all"}


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"ids": ["a"], "all": True},
        {"ids": ["a"], "prefix": "a"},
        {"prefix": "", "all": True},
        {"ids": [], "prefix": ""},
        {"all": False},
    ],
    ids=[
        "none",
        "ids+all",
        "ids+prefix",
        "empty-prefix+all",
        "empty-ids+empty-prefix",
        "all-false",
    ],
)
async def test_cancel_requires_exactly_one_selector(body: dict[str, Any]) -> None:
    async with serving(make_app()) as client:
        response = await client.post("/rollout/cancel", json=body)
    assert response.status_code == 422
    assert response.json() == SELECTOR_ERROR


@pytest.mark.parametrize("body", [{"ids": []}, {"prefix": ""}, {"all": True}])
async def test_empty_ids_and_empty_prefix_count_as_selectors(body: dict[str, Any]) -> None:
    async with serving(make_app()) as client:
        response = await client.post("/rollout/cancel", json=body)
    assert response.status_code == 200


async def test_cancel_with_a_non_list_ids_gets_422() -> None:
    async with serving(make_app()) as client:
        response = await client.post("/rollout/cancel", json={"ids": "r-1"})
    assert response.status_code == 422


async def test_local_backend_cancel_reports_cancelled_running_and_the_poller_sees_cancelled() -> (
    None
):
    app = make_app(workflow=GatedWorkflow, grader=None)
    async with serving(app) as client:
        token = await admit(client, "r-1", metadata={"gate": "never"})
        await until_running(app, "r-1")
        response = await client.post("/rollout/cancel", json={"ids": ["r-1"]})
        result = await poll_until_terminal(client, "r-1", token)
    assert response.json() == {"dispositions": {"r-1": "cancelled_running"}}
    assert result["status"] == "cancelled"
    assert result["err_message"] == "cancelled"
    assert result["err_category"] is None
    assert result["sample"] is None


async def test_unknown_and_finished_ids_are_not_found() -> None:
    async with serving(make_app()) as client:
        token = await admit(client, "done")
        await poll_until_terminal(client, "done", token)
        response = await client.post("/rollout/cancel", json={"ids": ["done", "ghost"]})
    assert response.json()["dispositions"] == {"done": "not_found", "ghost": "not_found"}


async def test_repeat_cancel_returns_the_stored_disposition_until_the_result_is_fixed() -> None:
    class Slow(GatedWorkflow):
        async def run(self, ctx: Any) -> Any:
            try:
                await Gate.get("never").wait()
            except asyncio.CancelledError:
                await Gate.get("cleanup").wait()
                raise

    app = make_app(workflow=Slow, grader=None)
    async with serving(app) as client:
        token = await admit(client, "r-1")
        await until_running(app, "r-1")
        first = (await client.post("/rollout/cancel", json={"ids": ["r-1"]})).json()
        second = (await client.post("/rollout/cancel", json={"ids": ["r-1"]})).json()
        Gate.get("cleanup").set()
        await poll_until_terminal(client, "r-1", token)
        third = (await client.post("/rollout/cancel", json={"ids": ["r-1"]})).json()
    assert first == second == {"dispositions": {"r-1": "cancelled_running"}}
    assert third == {"dispositions": {"r-1": "not_found"}}


async def test_prefix_selects_matching_registered_ids() -> None:
    app = make_app(workflow=GatedWorkflow, grader=None)
    async with serving(app) as client:
        for rid in ("run-a-1", "run-a-2", "run-b-1"):
            await admit(client, rid, metadata={"gate": "g"})
            await until_running(app, rid)
        response = await client.post("/rollout/cancel", json={"prefix": "run-a-"})
        Gate.get("g").set()
    assert response.json()["dispositions"] == {
        "run-a-1": "cancelled_running",
        "run-a-2": "cancelled_running",
    }


async def test_all_selects_every_entry_including_retained_ones() -> None:
    app = make_app(workflow=GatedWorkflow, grader=None)
    async with serving(app) as client:
        token = await admit(client, "finished", metadata={"gate": "open"}, grade=False)
        Gate.get("open").set()
        await poll_until_terminal(client, "finished", token)
        await admit(client, "live", metadata={"gate": "never"})
        await until_running(app, "live")
        response = await client.post("/rollout/cancel", json={"all": True})
    assert response.json()["dispositions"] == {
        "finished": "not_found",
        "live": "cancelled_running",
    }


async def test_a_workflow_that_swallows_cancellation_publishes_its_real_result() -> None:
    class Swallower(GatedWorkflow):
        async def run(self, ctx: Any) -> Any:
            try:
                await Gate.get("never").wait()
            except asyncio.CancelledError:
                pass
            return [{"role": "assistant", "content": "kept going"}]

    app = make_app(workflow=Swallower, grader=None)
    async with serving(app) as client:
        token = await admit(client, "r-1", grade=False)
        await until_running(app, "r-1")
        await client.post("/rollout/cancel", json={"ids": ["r-1"]})
        result = await poll_until_terminal(client, "r-1", token)
    assert result["status"] == "success"
    assert result["sample"]["messages"][-1]["content"] == "kept going"


class OwningBackend(ExecutionBackend):
    """A backend (Harbor-like) that owns cancellation and ends execute() itself."""

    def __init__(self) -> None:
        self.stop: dict[str, asyncio.Event] = {}
        self.cancel_calls: list[list[str] | None] = []

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        event = self.stop.setdefault(request.id, asyncio.Event())
        await event.wait()
        return ExecutionOutcome(
            workflow=ExecutionResult(status=RolloutStatus.CANCELLED, err_message="backend stopped")
        )

    async def cancel_rollouts(
        self, *, ids: list[str] | None = None, prefix: str | None = None, all: bool = False
    ) -> dict[str, str]:
        self.cancel_calls.append(ids)
        for rid in ids or []:
            self.stop.setdefault(rid, asyncio.Event()).set()
        return {rid: "cancelled_queued" for rid in ids or []}


async def test_a_backend_that_owns_cancellation_answers_and_ends_execute_itself() -> None:
    backend = OwningBackend()
    app = create_rollout_server(
        backend=backend,
        configure_logging=False,
        result_wait_timeout_sec=0.5,
        polling_lease_timeout_sec=5.0,
    )
    async with serving(app) as client:
        token = await admit(client, "r-1")
        response = await client.post("/rollout/cancel", json={"ids": ["r-1"]})
        result = await poll_until_terminal(client, "r-1", token)
    assert response.json()["dispositions"] == {"r-1": "cancelled_queued"}
    assert backend.cancel_calls == [["r-1"]]
    # The server did not cancel its task: the backend's own outcome was published.
    assert result["status"] == "cancelled"
    assert result["err_message"] == "backend stopped"


class ForgetfulBackend(OwningBackend):
    """Answers not_found without holding a terminal state: the server cancels its task."""

    async def cancel_rollouts(
        self, *, ids: list[str] | None = None, prefix: str | None = None, all: bool = False
    ) -> dict[str, str]:
        self.cancel_calls.append(ids)
        return {rid: "not_found" for rid in ids or []}


async def test_backend_not_found_without_terminal_state_falls_back_to_the_server_cancel() -> None:
    backend = ForgetfulBackend()
    app = create_rollout_server(
        backend=backend,
        configure_logging=False,
        result_wait_timeout_sec=0.5,
        polling_lease_timeout_sec=5.0,
    )
    async with serving(app) as client:
        token = await admit(client, "r-1")
        await eventually(lambda: "r-1" in backend.stop)
        response = await client.post("/rollout/cancel", json={"ids": ["r-1"]})
        result = await poll_until_terminal(client, "r-1", token)
    assert response.json()["dispositions"] == {"r-1": "cancelled_running"}
    assert result["status"] == "cancelled"
    assert result["err_message"] == "cancelled"


async def test_a_cancel_before_the_task_is_bound_is_applied_at_bind() -> None:
    async def no_backend(_: str) -> None:
        return None

    registry = RolloutRegistry(
        result_wait_timeout_sec=0.5,
        polling_lease_timeout_sec=5.0,
        result_retention_sec=60.0,
        cancel_in_backend=no_backend,
    )
    entry, token = await registry.register("r-1")
    dispositions = await registry.cancel(ids=["r-1"])
    started = asyncio.Event()

    async def never_started() -> None:
        started.set()

    task = asyncio.create_task(never_started())
    await registry.bind_task(entry, task)
    await asyncio.wait({task}, timeout=5)
    result = await registry.wait_for_result("r-1", token)
    await registry.close()
    assert dispositions == {"r-1": "cancelled_queued"}
    assert task.cancelled() and not started.is_set()
    # A task that never started reports cancelled with a null message.
    assert result["status"] == "cancelled"
    assert result["err_message"] is None


async def test_cancelled_rollout_writes_no_trajectory(_artifact_root: Any) -> None:
    async with serving(make_app(workflow=GatedWorkflow, grader=None)) as client:
        token = await admit(client, "r-1", metadata={"gate": "never"})
        await client.post("/rollout/cancel", json={"ids": ["r-1"]})
        await poll_until_terminal(client, "r-1", token)
        server: _Server = client._transport.app.state.osmosis_server  # type: ignore[attr-defined]
        assert server.registry.entries["r-1"].finished
    assert not (_artifact_root / "r-1" / "trajectory.json").exists()


async def test_poll_after_cancel_does_not_renew_or_revive() -> None:
    async with serving(make_app(workflow=GatedWorkflow, grader=None)) as client:
        token = await admit(client, "r-1", metadata={"gate": "never"})
        await client.post("/rollout/cancel", json={"ids": ["r-1"]})
        first = await poll_until_terminal(client, "r-1", token)
        again = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
    assert first == again


class _ConvertsCancellation(GatedWorkflow):
    """Turns its cancellation into an error of its own, as some frameworks do."""

    async def run(self, ctx: Any) -> Any:
        try:
            return await super().run(ctx)
        except asyncio.CancelledError:
            raise RuntimeError("agent run aborted") from None


@pytest.mark.parametrize(
    "workflow", [GatedWorkflow, _ConvertsCancellation], ids=["running", "converted-by-user-code"]
)
async def test_a_cancelled_rollout_logs_one_line_and_no_traceback(
    caplog: pytest.LogCaptureFixture, workflow: Any
) -> None:
    import logging

    from osmosis_rollout import AgentWorkflowConfig, ConcurrencyConfig

    config = AgentWorkflowConfig(name="w", concurrency=ConcurrencyConfig(max_concurrent=1))
    app = make_app(workflow, workflow_config=config)
    caplog.set_level(logging.INFO, logger="osmosis_rollout")
    async with serving(app) as client:
        token = await admit(client, "r-cancel", metadata={"gate": "never"})
        queued = await admit(client, "r-queued", metadata={"gate": "never"})
        await until_running(app, "r-cancel")
        response = await client.post("/rollout/cancel", json={"ids": ["r-cancel", "r-queued"]})
        assert response.json()["dispositions"]["r-cancel"] == "cancelled_running"
        first = await poll_until_terminal(client, "r-cancel", token)
        await poll_until_terminal(client, "r-queued", queued)
    assert first["status"] == "cancelled"
    assert not [r for r in caplog.records if r.exc_info], "a cancelled rollout logged a traceback"
    about = [r.getMessage() for r in caplog.records if "r-cancel" in r.getMessage()]
    assert about == ["rollout r-cancel cancelled"]
    assert [r.getMessage() for r in caplog.records if "r-queued" in r.getMessage()] == [
        "rollout r-queued cancelled"
    ]
