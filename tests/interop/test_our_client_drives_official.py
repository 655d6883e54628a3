"""OUR ``RolloutClient`` drives the OFFICIAL rollout server (osmosis-ai 0.3.8, Python 3.12).

The official server is the official-style entrypoint run as ``python main.py`` in the official
venv (their ``create_rollout_server`` + their ``LocalBackend``), with a 0.5 s result wait and a
4 s polling lease; the model is our ``PolicyServer`` in this process.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from interop_support import LEASE_SEC, RESULT_WAIT_SEC, ServerProcess

from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.errors import RolloutProtocolError
from osmosis_rollout.types import POLLING_LEASE_HEADER

pytestmark = pytest.mark.timeout(900)  # the first run builds the official venv


@pytest.fixture
async def client(official_server: ServerProcess) -> AsyncIterator[RolloutClient]:
    async with RolloutClient(official_server.url, admission_timeout_sec=10) as rollout_client:
        yield rollout_client


def _request(policy_server: Any, rollout_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "initial_messages": [{"role": "user", "content": prompt}],
        "chat_completions_url": policy_server.rollout_url(rollout_id),
        "llm_api_key": policy_server.api_key,
        **fields,
    }


async def test_our_client_runs_rollouts_on_the_official_server_to_success_with_reward(
    client: RolloutClient, policy_server: Any
) -> None:
    handles = [
        await client.run_rollout_async(
            **_request(policy_server, f"ours-ok-{i}", f"What is {i} times 7?", label=str(i * 7))
        )
        for i in range(2, 6)
    ]
    wrong = await client.run_rollout_async(
        **_request(policy_server, "ours-wrong", "What is 3 times 3? wrong", label="9")
    )
    assert handles[0].admission.result_wait_timeout_sec == RESULT_WAIT_SEC
    assert handles[0].admission.polling_lease_timeout_sec == LEASE_SEC
    assert len(handles[0].admission.polling_lease_token) >= 32
    async with asyncio.timeout(30):
        results = [await handle for handle in handles]
        wrong_result = await wrong

    for i, result in zip(range(2, 6), results, strict=True):
        assert result.status.value == "success", result
        assert result.sample is not None and result.sample.reward == 1.0
        assert result.sample.label == str(i * 7)
        assert result.sample.messages[-1] == {
            "role": "assistant",
            "content": f"The answer is {i * 7}",
        }
        assert result.err_message is None and result.err_category is None
    assert wrong_result.sample is not None and wrong_result.sample.reward == 0.0
    assert policy_server.log("ours-ok-2").calls, "the official workflow called our policy"


async def test_our_client_observes_running_and_grading_on_the_official_server(
    client: RolloutClient, policy_server: Any
) -> None:
    handle = await client.run_rollout_async(
        **_request(
            policy_server,
            "ours-steps",
            "2 times 4",
            label="8",
            metadata={"mode": "sleep", "seconds": 1},
        )
    )
    async with asyncio.timeout(30):
        assert (await handle.wait_for_running()).value == "running"  # the sleep outlasts a poll
        assert (await handle.wait_for_grading()).value in {"grading", "success"}
        result = await handle
    assert result.status.value == "success"
    assert handle.latest_result == result


@pytest.mark.parametrize(
    ("fields", "status", "category", "message"),
    [
        ({"metadata": {"mode": "fail"}}, "failure", "agent_error", "workflow failed on purpose"),
        (
            {"metadata": {"mode": "invalid"}},
            "failure",
            "validation_error",
            "workflow rejected its input on purpose",
        ),
        (
            {"metadata": {"mode": "sleep", "seconds": 10}, "agent_timeout_sec": 0.3},
            "failure",
            "timeout",
            "workflow exceeded its 0.3s deadline",
        ),
        ({"label": None}, "failure", None, None),  # no label, no metadata: a bare failure
    ],
    ids=["agent_error", "validation_error", "timeout", "bare_failure"],
)
async def test_our_client_reads_official_failures_with_their_categories(
    client: RolloutClient,
    policy_server: Any,
    fields: dict[str, Any],
    status: str,
    category: str | None,
    message: str | None,
) -> None:
    rollout_id = f"ours-failure-{category}"
    request = {**_request(policy_server, rollout_id, "2 times 3", label="6"), **fields}
    async with asyncio.timeout(30):
        result = await (await client.run_rollout_async(**request))
    assert result.status.value == status
    assert result.sample is None
    assert (result.err_category.value if result.err_category else None) == category
    assert (result.err_message or "").startswith(message or "")
    assert (result.err_message is None) == (message is None)


async def test_our_client_reads_official_grader_outcomes(
    client: RolloutClient, policy_server: Any
) -> None:
    failed = await client.run_rollout_async(
        **_request(
            policy_server, "ours-grader", "2 times 3", label="6", metadata={"mode": "grader_error"}
        )
    )
    removed = await client.run_rollout_async(
        **_request(
            policy_server, "ours-remove", "2 times 3", label="6", metadata={"mode": "remove"}
        )
    )
    ungraded = await client.run_rollout_async(
        **_request(policy_server, "ours-ungraded", "2 times 3", label="6", grade=False)
    )
    async with asyncio.timeout(30):
        failed_result, removed_result, ungraded_result = (
            await failed,
            await removed,
            await ungraded,
        )

    assert (failed_result.status.value, failed_result.err_category) == ("failure", "agent_error")
    assert failed_result.err_message == "'k'"
    assert failed_result.sample is not None and failed_result.sample.reward is None
    assert removed_result.status.value == "success"
    assert removed_result.sample is not None and removed_result.sample.remove_sample is True
    assert removed_result.sample.reward is None
    assert ungraded_result.status.value == "success"
    assert ungraded_result.sample is not None and ungraded_result.sample.reward is None


async def test_polling_renews_the_official_lease_and_an_unpolled_rollout_expires(
    client: RolloutClient, official_server: ServerProcess, policy_server: Any
) -> None:
    """A rollout longer than the lease survives while polled; one nobody polls expires."""
    seconds = LEASE_SEC + 1.5
    polled = await client.run_rollout_async(
        **_request(
            policy_server,
            "ours-long",
            "3 times 4",
            label="12",
            metadata={"mode": "sleep", "seconds": seconds},
        )
    )
    abandoned = await client.run_rollout_async(
        **_request(
            policy_server,
            "ours-abandoned",
            "3 times 4",
            label="12",
            metadata={"mode": "sleep", "seconds": 30},
        )
    )
    first_deadline = polled.lease_deadline
    assert abandoned.cancel()  # stops local polling only: the server keeps the rollout
    async with asyncio.timeout(30):
        result = await polled
    assert result.status.value == "success" and result.sample is not None
    assert result.sample.reward == 1.0
    assert polled.lease_deadline > first_deadline

    # By now the abandoned rollout's lease (last renewed at admission) has lapsed.
    token = abandoned.admission.polling_lease_token
    async with httpx.AsyncClient(base_url=official_server.url, timeout=10) as raw:
        response = await raw.get(
            "/rollout/ours-abandoned/result", headers={POLLING_LEASE_HEADER: token}
        )
    assert response.status_code == 200
    assert response.json() == {
        "rollout_id": "ours-abandoned",
        "status": "failure",
        "sample": None,
        "err_message": "polling lease expired",
        "err_category": "lease_expired",
    }


async def test_our_client_cancels_a_running_official_rollout(
    client: RolloutClient, policy_server: Any
) -> None:
    handle = await client.run_rollout_async(
        **_request(
            policy_server,
            "ours-cancel",
            "2 times 3",
            label="6",
            metadata={"mode": "sleep", "seconds": 20},
        )
    )
    async with asyncio.timeout(30):
        assert (await handle.wait_for_running()).value == "running"
        first = await client.cancel_rollout("ours-cancel")
        result = await handle
    assert first.dispositions == {"ours-cancel": "cancelled_running"}
    assert result.status.value == "cancelled"
    assert (result.err_message, result.err_category, result.sample) == ("cancelled", None, None)
    after = await client.cancel_rollout("ours-cancel")
    assert after.dispositions == {"ours-cancel": "not_found"}
    missing = await client.cancel_rollouts(ids=["never-admitted"])
    assert missing.dispositions == {"never-admitted": "not_found"}


async def test_our_client_gets_a_protocol_error_for_a_duplicate_id_on_the_official_server(
    client: RolloutClient, policy_server: Any
) -> None:
    request = _request(policy_server, "ours-dup", "2 times 3", label="6")
    first = await client.run_rollout_async(**request)
    with pytest.raises(RolloutProtocolError) as caught:
        await client.run_rollout_async(**request)
    assert caught.value.status_code == 409
    async with asyncio.timeout(30):
        assert (await first).status.value == "success"


async def test_our_client_reads_official_health_and_waits_for_idle(
    client: RolloutClient, policy_server: Any
) -> None:
    handle = await client.run_rollout_async(
        **_request(
            policy_server,
            "ours-idle",
            "2 times 3",
            label="6",
            metadata={"mode": "sleep", "seconds": 0.5},
        )
    )
    health = await client.health()
    assert health["status"] == "ok"
    assert health["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 1}
    async with asyncio.timeout(30):
        idle = await client.wait_idle(
            timeout_sec=20, poll_interval_sec=0.1, process_id=health["process_id"]
        )
        assert (await handle).status.value == "success"
    assert idle["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}
    assert idle["process_id"] == health["process_id"]
