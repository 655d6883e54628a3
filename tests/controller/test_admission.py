"""Admission: 429 retried after Retry-After, every other non-202 fails at once."""

from __future__ import annotations

import asyncio
import json
import math
from typing import TYPE_CHECKING

import httpx
import pytest
import respx
from pydantic import ValidationError

from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.controller.client import ADMISSION_RETRY_DELAYS_SEC, retry_after_delay
from osmosis_rollout.errors import (
    RolloutAdmissionTimeoutError,
    RolloutAdmissionUnknownError,
    RolloutProtocolError,
)

if TYPE_CHECKING:
    from tests.controller.conftest import Wire

MESSAGES = [{"role": "user", "content": "2+2?"}]
POLICY = "http://policy.test/v1/rollouts/r1"


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, 1.0),
        ("5", 5.0),
        ("2.5", 2.5),
        (" 3 ", 3.0),
        ("0", 0.05),
        ("-4", 0.05),
        ("600", 60.0),
        ("nan", 1.0),
        ("inf", 1.0),
        ("soon", 1.0),
        ("Wed, 21 Oct 2015 07:28:00 GMT", 1.0),
    ],
)
def test_retry_after_is_clamped_and_defaults_to_one_second(
    header: str | None, expected: float
) -> None:
    assert retry_after_delay(header) == expected


async def test_admission_posts_the_validated_request_and_returns_a_polling_handle(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    post = router.post("/rollout").mock(return_value=wire.admitted("r1", token="lease-1"))
    poll = router.get("/rollout/r1/result").mock(return_value=wire.result("r1"))
    handle = await client.run_rollout_async(
        MESSAGES, POLICY, "r1", label="4", metadata={"k": 1}, grade=False, agent_timeout_sec=3
    )
    assert handle.rollout_id == "r1"
    result = await handle
    assert result.status == "success"
    assert json.loads(post.calls.last.request.content) == {
        "initial_messages": MESSAGES,
        "label": "4",
        "metadata": {"k": 1},
        "rollout_id": "r1",
        "chat_completions_url": POLICY,
        "llm_api_key": None,
        "grade": False,
        "agent_timeout_sec": 3.0,
        "grader_timeout_sec": None,
        "extra_fields": None,
    }
    assert poll.calls.last.request.headers["X-Osmosis-Rollout-Lease"] == "lease-1"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"rollout_id": "../x"},
        {"rollout_id": ""},
        {"llm_api_key": ""},
        {"agent_timeout_sec": math.nan},
        {"grader_timeout_sec": math.inf},
    ],
)
async def test_invalid_requests_fail_locally_without_a_post(
    router: respx.MockRouter, client: RolloutClient, kwargs: dict[str, object]
) -> None:
    post = router.post("/rollout")
    call = {"initial_messages": MESSAGES, "chat_completions_url": POLICY, "rollout_id": "r1"}
    call.update(kwargs)
    with pytest.raises(ValidationError):
        await client.run_rollout_async(**call)  # type: ignore[arg-type]
    assert not post.called


@pytest.mark.parametrize(
    "too_busy",
    [
        httpx.Response(429, headers={"Retry-After": "0"}),
        httpx.Response(429),
        httpx.Response(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}),
    ],
    ids=["retry-after-seconds", "no-retry-after", "http-date-retry-after"],
)
async def test_429_is_retried_until_admitted(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire], too_busy: httpx.Response
) -> None:
    post = router.post("/rollout").mock(side_effect=[too_busy, wire.admitted("r1")])
    router.get("/rollout/r1/result").mock(return_value=wire.result("r1"))
    result = await client.run_rollout(MESSAGES, POLICY, "r1")
    assert result.status == "success"
    assert post.call_count == 2
    assert post.calls[0].request.content == post.calls[1].request.content


@pytest.mark.parametrize("status", [409, 502, 503, 504, 500, 422, 401, 200])
async def test_any_other_non_202_admission_answer_fails_at_once(
    router: respx.MockRouter, client: RolloutClient, status: int
) -> None:
    post = router.post("/rollout").mock(
        return_value=httpx.Response(status, json={"detail": "rollout_id is already registered"})
    )
    with pytest.raises(RolloutProtocolError) as caught:
        await client.run_rollout_async(MESSAGES, POLICY, "r1")
    assert caught.value.status_code == status
    assert str(status) in str(caught.value)
    assert post.call_count == 1


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"rollout_id": "r1", "status": "queued"}',
        b'{"rollout_id": "r1", "status": "queued", "polling_lease_token": "",'
        b' "result_wait_timeout_sec": 1, "polling_lease_timeout_sec": 5}',
        b'{"rollout_id": "r1", "status": "queued", "polling_lease_token": "t",'
        b' "result_wait_timeout_sec": 5, "polling_lease_timeout_sec": 5}',
        b'{"rollout_id": "r1", "status": "queued", "polling_lease_token": "t",'
        b' "result_wait_timeout_sec": 0, "polling_lease_timeout_sec": 5}',
        b'{"rollout_id": "r1", "status": "queued", "polling_lease_token": "t",'
        b' "result_wait_timeout_sec": 1, "polling_lease_timeout_sec": Infinity}',
        b'{"rollout_id": "r2", "status": "queued", "polling_lease_token": "t",'
        b' "result_wait_timeout_sec": 1, "polling_lease_timeout_sec": 5}',
    ],
    ids=[
        "not-json",
        "not-object",
        "no-lease",
        "empty-token",
        "lease-not-above-wait",
        "zero-wait",
        "infinite-lease",
        "other-rollout-id",
    ],
)
async def test_202_with_an_invalid_body_is_a_protocol_error(
    router: respx.MockRouter, client: RolloutClient, body: bytes
) -> None:
    router.post("/rollout").mock(return_value=httpx.Response(202, content=body))
    poll = router.get(url__regex=r"/result$")
    with pytest.raises(RolloutProtocolError) as caught:
        await client.run_rollout_async(MESSAGES, POLICY, "r1")
    assert caught.value.status_code == 202
    assert not poll.called


async def test_connect_errors_on_admission_are_retried_then_propagate(
    router: respx.MockRouter, client: RolloutClient
) -> None:
    post = router.post("/rollout").mock(side_effect=httpx.ConnectError("refused"))
    with pytest.raises(httpx.ConnectError):
        await client.run_rollout_async(MESSAGES, POLICY, "r1")
    assert post.call_count == 1 + len(ADMISSION_RETRY_DELAYS_SEC)


async def test_a_connect_error_then_a_202_admits(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    post = router.post("/rollout").mock(
        side_effect=[httpx.ConnectError("refused"), wire.admitted("r1")]
    )
    router.get("/rollout/r1/result").mock(return_value=wire.result("r1"))
    handle = await client.run_rollout_async(MESSAGES, POLICY, "r1")
    assert (await handle).status == "success"
    assert post.call_count == 2


async def test_an_ambiguous_failure_then_409_is_a_named_error(
    router: respx.MockRouter, client: RolloutClient
) -> None:
    already = httpx.Response(409, json={"detail": "rollout_id is already registered"})
    post = router.post("/rollout").mock(side_effect=[httpx.ReadError("reset"), already])
    with pytest.raises(RolloutAdmissionUnknownError) as caught:
        await client.run_rollout_async(MESSAGES, POLICY, "r1")
    assert caught.value.rollout_id == "r1"
    assert "answered 409" in str(caught.value)
    assert "cancel_rollout" in str(caught.value)
    assert isinstance(caught.value.__cause__, httpx.ReadError)
    assert post.call_count == 2


async def test_an_ambiguous_failure_then_202_admits(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.post("/rollout").mock(side_effect=[httpx.ReadTimeout("slow"), wire.admitted("r1")])
    router.get("/rollout/r1/result").mock(return_value=wire.result("r1"))
    handle = await client.run_rollout_async(MESSAGES, POLICY, "r1")
    assert (await handle).status == "success"


async def test_two_ambiguous_failures_are_a_named_error(
    router: respx.MockRouter, client: RolloutClient
) -> None:
    router.post("/rollout").mock(
        side_effect=[httpx.ReadError("reset"), httpx.RemoteProtocolError("cut")]
    )
    with pytest.raises(RolloutAdmissionUnknownError, match="re-POST failed too"):
        await client.run_rollout_async(MESSAGES, POLICY, "r1")


async def test_admission_deadline_with_a_post_in_flight_says_it_may_have_succeeded(
    router: respx.MockRouter, wire: type[Wire]
) -> None:
    async def never_answers(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return wire.admitted("r1")

    router.post("/rollout").mock(side_effect=never_answers)
    cancel = router.post("/rollout/cancel")
    async with RolloutClient(wire.base_url, admission_timeout_sec=0.2) as client:
        with pytest.raises(RolloutAdmissionTimeoutError) as caught:
            await client.run_rollout_async(MESSAGES, POLICY, "r1")
    assert isinstance(caught.value, TimeoutError)
    assert "may have succeeded" in str(caught.value)
    assert "'r1'" in str(caught.value)
    assert not cancel.called


async def test_admission_deadline_while_backing_off_does_not_claim_admission(
    router: respx.MockRouter, wire: type[Wire]
) -> None:
    router.post("/rollout").mock(return_value=httpx.Response(429, headers={"Retry-After": "60"}))
    async with RolloutClient(wire.base_url, admission_timeout_sec=0.2) as client:
        with pytest.raises(RolloutAdmissionTimeoutError) as caught:
            await client.run_rollout_async(MESSAGES, POLICY, "r1")
    assert "may have succeeded" not in str(caught.value)


async def test_lease_deadline_counts_from_before_the_successful_post(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    async def slow_admit(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(0.2)
        return wire.admitted("r1", lease=30.0)

    router.post("/rollout").mock(side_effect=slow_admit)
    router.get("/rollout/r1/result").mock(side_effect=asyncio.Event().wait)
    loop = asyncio.get_running_loop()
    before = loop.time()
    handle = await client.run_rollout_async(MESSAGES, POLICY, "r1")
    after = loop.time()
    assert before + 30.0 <= handle.lease_deadline <= after + 30.0 - 0.2
    handle.cancel()
