"""cancel_rollout, health and wait_idle."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import httpx
import pytest
import respx

from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.errors import RolloutProtocolError

if TYPE_CHECKING:
    from tests.controller.conftest import Wire


async def test_cancel_rollout_posts_one_id_selector_and_returns_dispositions(
    router: respx.MockRouter, client: RolloutClient
) -> None:
    route = router.post("/rollout/cancel").mock(
        return_value=httpx.Response(200, json={"dispositions": {"r1": "cancelled_running"}})
    )
    answer = await client.cancel_rollout("r1")
    assert answer.dispositions == {"r1": "cancelled_running"}
    request = route.calls.last.request
    assert json.loads(request.content) == {"ids": ["r1"], "prefix": None, "all": False}
    assert request.extensions["timeout"] == {"connect": 5.0, "read": 5.0, "write": 5.0, "pool": 5.0}


async def test_cancel_rollouts_accepts_the_other_selectors(
    router: respx.MockRouter, client: RolloutClient
) -> None:
    route = router.post("/rollout/cancel").mock(
        return_value=httpx.Response(200, json={"dispositions": {}})
    )
    await client.cancel_rollouts(prefix="batch-")
    await client.cancel_rollouts(all=True)
    bodies = [json.loads(call.request.content) for call in route.calls]
    assert bodies == [
        {"ids": None, "prefix": "batch-", "all": False},
        {"ids": None, "prefix": None, "all": True},
    ]


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(422, json={"detail": "pass exactly one selector: ids, prefix, or all"}),
        httpx.Response(500),
        httpx.Response(200, json={"cancelled": ["r1"]}),
        httpx.Response(200, content=b"ok"),
    ],
    ids=["422", "500", "wrong-shape", "not-json"],
)
async def test_cancel_outside_the_protocol_is_a_protocol_error(
    router: respx.MockRouter, client: RolloutClient, answer: httpx.Response
) -> None:
    router.post("/rollout/cancel").mock(return_value=answer)
    with pytest.raises(RolloutProtocolError) as caught:
        await client.cancel_rollout("r1")
    assert caught.value.status_code == answer.status_code


async def test_health_returns_the_json_object(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.get("/health").mock(return_value=wire.health("p9", active=3))
    health = await client.health()
    assert health["process_id"] == "p9"
    assert health["lifecycle"]["active_rollouts"] == 3


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(401, json={"detail": "unauthorized"}),
        httpx.Response(200, json=["ok"]),
        httpx.Response(200, content=b"ok"),
    ],
    ids=["401", "json-list", "not-json"],
)
async def test_health_needs_a_200_json_object(
    router: respx.MockRouter, client: RolloutClient, answer: httpx.Response
) -> None:
    router.get("/health").mock(return_value=answer)
    with pytest.raises(RolloutProtocolError) as caught:
        await client.health()
    assert caught.value.status_code == answer.status_code


async def test_wait_idle_tolerates_transient_failures_until_no_rollout_is_active(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    route = router.get("/health").mock(
        side_effect=[
            httpx.Response(503),
            httpx.ConnectError("refused"),
            httpx.Response(408),
            httpx.Response(429),
            httpx.Response(599),
            wire.health("p1", active=2),
            wire.health("p1", active=1),
            wire.health("p1", active=0),
        ]
    )
    health = await client.wait_idle(timeout_sec=5, poll_interval_sec=0.01)
    assert health["lifecycle"]["active_rollouts"] == 0
    assert route.call_count == 8


async def test_wait_idle_fails_when_the_server_restarts(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.get("/health").mock(
        side_effect=[wire.health("p1", active=1), wire.health("p2", active=0)]
    )
    with pytest.raises(RolloutProtocolError, match="restarted"):
        await client.wait_idle(timeout_sec=5, poll_interval_sec=0.01)


async def test_wait_idle_fails_when_the_server_is_not_the_expected_process(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.get("/health").mock(return_value=wire.health("p2", active=0))
    with pytest.raises(RolloutProtocolError, match="'p1' became 'p2'"):
        await client.wait_idle(timeout_sec=5, poll_interval_sec=0.01, process_id="p1")


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, json={"status": "ok", "lifecycle": {"active_rollouts": 0}}),
        httpx.Response(200, json={"status": "ok", "process_id": "p1"}),
        httpx.Response(404),
    ],
    ids=["no-process-id", "no-lifecycle", "404"],
)
async def test_wait_idle_rejects_servers_outside_the_protocol(
    router: respx.MockRouter, client: RolloutClient, answer: httpx.Response
) -> None:
    route = router.get("/health").mock(return_value=answer)
    with pytest.raises(RolloutProtocolError):
        await client.wait_idle(timeout_sec=5, poll_interval_sec=0.01)
    assert route.call_count == 1


async def test_wait_idle_times_out_naming_what_it_last_saw(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.get("/health").mock(return_value=wire.health("p1", active=4))
    with pytest.raises(TimeoutError, match="4 active rollout"):
        await client.wait_idle(timeout_sec=0.2, poll_interval_sec=0.01)


@pytest.mark.parametrize(
    "kwargs",
    [{"timeout_sec": 0}, {"timeout_sec": float("inf")}, {"poll_interval_sec": float("nan")}],
)
async def test_wait_idle_rejects_bad_intervals(
    client: RolloutClient, kwargs: dict[str, float]
) -> None:
    with pytest.raises(ValueError, match="must be finite and > 0"):
        await client.wait_idle(**kwargs)
