"""GET /rollout/{id}/result: long poll, 404/403/422, lease renewal and expiry, retention, id reuse."""

from __future__ import annotations

import asyncio
from typing import Any

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
    AgentWorkflow,
    AgentWorkflowContext,
    RolloutResultResponse,
    RolloutSample,
)
from osmosis_rollout.server.app import _Server


class TrajectoryWorkflow(AgentWorkflow[Any]):
    """Returns a sample whose trajectory differs from its messages."""

    async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
        from osmosis_rollout import get_rollout_context

        rollout = get_rollout_context()
        assert rollout is not None

        class Source:
            async def get_sample(self) -> RolloutSample:
                return RolloutSample(
                    messages=[{"role": "assistant", "content": "cba"}],
                    trajectory_messages=[{"role": "assistant", "content": "secret"}],
                    label="cba",
                )

            async def get_preview(self, max_messages: int) -> None:
                return None

        rollout.set_sample_source(Source())  # type: ignore[arg-type]
        return None


async def test_terminal_result_has_every_key_and_no_trajectory_messages() -> None:
    async with serving(make_app(workflow=TrajectoryWorkflow)) as client:
        token = await admit(client, "r-1")
        body = await poll_until_terminal(client, "r-1", token)
    assert set(body) == {"rollout_id", "status", "sample", "err_message", "err_category"}
    assert body["status"] == "success"
    assert set(body["sample"]) == {
        "messages",
        "label",
        "reward",
        "remove_sample",
        "metrics",
        "extra_fields",
    }
    assert "secret" not in str(body)
    assert body["sample"]["reward"] == 1.0
    RolloutResultResponse.model_validate(body)


async def test_in_progress_result_carries_status_and_nulls() -> None:
    async with serving(make_app(workflow=GatedWorkflow, grader=None)) as client:
        token = await admit(client, "r-1", metadata={"gate": "g"})
        body = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
        Gate.get("g").set()
    assert body == {
        "rollout_id": "r-1",
        "status": "running",
        "sample": None,
        "err_message": None,
        "err_category": None,
    }


async def test_long_poll_returns_early_on_a_status_change() -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        result_wait_timeout_sec=30.0,
        polling_lease_timeout_sec=60.0,
    )
    async with serving(app) as client:
        token = await admit(client, "r-1", metadata={"gate": "g"}, grade=False)
        await eventually(
            lambda: app.state.osmosis_server.registry.entries["r-1"].progress.status == "running"
        )
        poll = asyncio.create_task(client.get("/rollout/r-1/result", headers=lease(token)))
        await asyncio.sleep(0.05)
        assert not poll.done()
        Gate.get("g").set()
        response = await asyncio.wait_for(poll, 5)
    # The 30 s wait was cut short by the change to a terminal status.
    assert response.json()["status"] == "success"


async def test_long_poll_returns_current_status_after_the_wait_timeout() -> None:
    async with serving(make_app(workflow=GatedWorkflow, grader=None)) as client:
        token = await admit(client, "r-1", metadata={"gate": "g"})
        first = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
        second = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
        Gate.get("g").set()
    assert first["status"] == second["status"] == "running"


async def test_unknown_rollout_gets_404() -> None:
    async with serving(make_app()) as client:
        response = await client.get("/rollout/nope/result", headers=lease("x"))
    assert response.status_code == 404
    assert response.json() == {"detail": "unknown rollout_id"}


async def test_unknown_rollout_is_404_even_with_a_wrong_token() -> None:
    async with serving(make_app()) as client:
        await admit(client, "r-1")
        response = await client.get("/rollout/other/result", headers=lease("wrong"))
    assert response.status_code == 404


async def test_wrong_lease_on_a_live_rollout_gets_403() -> None:
    async with serving(make_app(workflow=GatedWorkflow, grader=None)) as client:
        await admit(client, "r-1", metadata={"gate": "g"})
        response = await client.get("/rollout/r-1/result", headers=lease("wrong"))
        Gate.get("g").set()
    assert response.status_code == 403
    assert response.json() == {"detail": "invalid polling lease"}


async def test_wrong_lease_on_a_finished_rollout_gets_403() -> None:
    async with serving(make_app()) as client:
        token = await admit(client, "r-1")
        await poll_until_terminal(client, "r-1", token)
        response = await client.get("/rollout/r-1/result", headers=lease(token + "x"))
    assert response.status_code == 403


async def test_missing_lease_header_gets_422() -> None:
    async with serving(make_app()) as client:
        await admit(client, "r-1")
        response = await client.get("/rollout/r-1/result")
    assert response.status_code == 422
    assert "X-Osmosis-Rollout-Lease" in response.text


async def test_empty_lease_header_gets_422() -> None:
    async with serving(make_app()) as client:
        await admit(client, "r-1")
        response = await client.get("/rollout/r-1/result", headers=lease(""))
    assert response.status_code == 422


async def test_a_wrong_token_does_not_renew_the_lease() -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        result_wait_timeout_sec=0.05,
        polling_lease_timeout_sec=0.3,
    )
    async with serving(app) as client:
        token = await admit(client, "r-1", metadata={"gate": "never"})
        for _ in range(8):
            await client.get("/rollout/r-1/result", headers=lease("wrong"))
            await asyncio.sleep(0.05)
        body = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
    assert body["err_category"] == "lease_expired"


async def test_correct_polls_renew_the_lease_past_its_first_deadline() -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        result_wait_timeout_sec=0.05,
        polling_lease_timeout_sec=0.3,
    )
    async with serving(app) as client:
        token = await admit(client, "r-1", metadata={"gate": "g"}, grade=False)
        for _ in range(12):  # ~0.6 s of polling: twice the lease
            body = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
            assert body["status"] == "running"
        Gate.get("g").set()
        result = await poll_until_terminal(client, "r-1", token)
    assert result["status"] == "success"


async def test_lease_watcher_fails_and_cancels_a_rollout_nobody_polls() -> None:
    app = make_app(
        workflow=GatedWorkflow,
        grader=None,
        result_wait_timeout_sec=0.05,
        polling_lease_timeout_sec=0.2,
    )
    async with serving(app) as client:
        token = await admit(client, "r-1", metadata={"gate": "never"})
        server: _Server = app.state.osmosis_server
        entry = server.registry.entries["r-1"]
        await eventually(lambda: entry.finished)
        assert entry.task is not None
        await asyncio.wait({entry.task}, timeout=5)
        body = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
    assert body == {
        "rollout_id": "r-1",
        "status": "failure",
        "sample": None,
        "err_message": "polling lease expired",
        "err_category": "lease_expired",
    }
    assert entry.task.cancelled()


async def test_a_late_poll_finds_the_lapsed_lease_and_cancels() -> None:
    app = make_app(workflow=GatedWorkflow, grader=None, polling_lease_timeout_sec=60.0)
    async with serving(app) as client:
        token = await admit(client, "r-1", metadata={"gate": "never"})
        server: _Server = app.state.osmosis_server
        # Time passes for this lease only: its deadline is behind us, its watcher not yet due.
        lease_state = server.registry.leases.get("r-1")
        lease_state.deadline = asyncio.get_running_loop().time() - 1
        body = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
        task = server.registry.entries["r-1"].task
        assert task is not None
        await asyncio.wait({task}, timeout=5)
    assert body["status"] == "failure"
    assert body["err_category"] == "lease_expired"
    assert task.cancelled()


async def test_a_completion_after_the_deadline_is_a_lease_failure() -> None:
    app = make_app(workflow=GatedWorkflow, grader=None, polling_lease_timeout_sec=60.0)
    async with serving(app) as client:
        token = await admit(client, "r-1", metadata={"gate": "g"})
        server: _Server = app.state.osmosis_server
        entry = server.registry.entries["r-1"]
        await eventually(lambda: entry.progress.status == "running")
        server.registry.leases.get("r-1").deadline = asyncio.get_running_loop().time() - 1
        Gate.get("g").set()
        await eventually(lambda: entry.finished)
        body = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
    assert body["err_category"] == "lease_expired"
    assert body["sample"] is None


async def test_stored_result_is_served_and_id_refused_within_retention() -> None:
    async with serving(make_app()) as client:
        token = await admit(client, "r-1")
        first = await poll_until_terminal(client, "r-1", token)
        again = (await client.get("/rollout/r-1/result", headers=lease(token))).json()
        readmit = await client.post("/rollout", json=init_body("r-1"))
    assert again == first
    assert readmit.status_code == 409


async def test_after_retention_the_id_is_unknown_and_can_be_admitted_again() -> None:
    app = make_app(result_retention_sec=0.1)
    async with serving(app) as client:
        token = await admit(client, "r-1")
        await poll_until_terminal(client, "r-1", token)
        server: _Server = app.state.osmosis_server
        await eventually(lambda: "r-1" not in server.registry.entries)
        gone = await client.get("/rollout/r-1/result", headers=lease(token))
        new_token = await admit(client, "r-1")
        result = await poll_until_terminal(client, "r-1", new_token)
    assert gone.status_code == 404
    assert new_token != token
    assert result["status"] == "success"


async def test_retention_waits_for_the_execution_task_to_end() -> None:
    """A lease failure is fixed before the task ends; the id stays reserved until it does."""

    class Stubborn(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> Any:
            try:
                await Gate.get("never").wait()
            except asyncio.CancelledError:
                await Gate.get("release").wait()  # cleanup outlives the cancel
                raise

    app = make_app(
        workflow=Stubborn,
        grader=None,
        result_wait_timeout_sec=0.05,
        polling_lease_timeout_sec=0.15,
        result_retention_sec=0.0,
    )
    async with serving(app) as client:
        await admit(client, "r-1")
        server: _Server = app.state.osmosis_server
        entry = server.registry.entries["r-1"]
        await eventually(lambda: entry.finished)
        await asyncio.sleep(0.1)
        still_reserved = (await client.post("/rollout", json=init_body("r-1"))).status_code
        Gate.get("release").set()
        await eventually(lambda: "r-1" not in server.registry.entries)
    assert still_reserved == 409
