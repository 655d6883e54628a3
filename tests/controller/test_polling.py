"""Long-polling results: status waits, read retries and the lease that bounds them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest
import respx

from osmosis_rollout.controller import RolloutClient, RolloutHandle
from osmosis_rollout.errors import RolloutProtocolError
from osmosis_rollout.types import RolloutStatus

if TYPE_CHECKING:
    from tests.controller.conftest import Wire

MESSAGES = [{"role": "user", "content": "hi"}]
POLICY = "http://policy.test/v1"
Gate = Callable[[], tuple[asyncio.Queue[Any], Callable[..., Any]]]


async def admit(
    client: RolloutClient,
    router: respx.MockRouter,
    wire: type[Wire],
    rollout_id: str = "r1",
    **lease: float,
) -> RolloutHandle:
    router.post("/rollout").mock(return_value=wire.admitted(rollout_id, **lease))
    return await client.run_rollout_async(MESSAGES, POLICY, rollout_id)


def dropped() -> httpx.RemoteProtocolError:
    return httpx.RemoteProtocolError("Server disconnected without sending a response.")


async def test_polling_follows_the_status_to_the_terminal_result(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire], gated: Gate
) -> None:
    queue, side_effect = gated()
    poll = router.get("/rollout/r1/result").mock(side_effect=side_effect)
    handle = await admit(client, router, wire)
    assert handle.status == RolloutStatus.QUEUED and handle.latest_result is None

    queue.put_nowait(wire.result("r1", "running"))
    assert await handle.wait_for_running() == RolloutStatus.RUNNING
    assert handle.latest_result is not None and handle.latest_result.status == "running"
    assert not handle.done()

    queue.put_nowait(wire.result("r1", "grading"))
    assert await handle.wait_for_grading() == RolloutStatus.GRADING

    queue.put_nowait(wire.result("r1", "success"))
    result = await handle
    assert result.status == RolloutStatus.SUCCESS
    assert result.sample is not None and result.sample.reward == 1.0
    assert handle.latest_result == result
    assert await handle.wait_for_completion() == result
    assert poll.call_count == 3
    assert {c.request.headers["X-Osmosis-Rollout-Lease"] for c in poll.calls} == {"tok"}


async def test_every_waiter_wakes_on_a_status_change(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire], gated: Gate
) -> None:
    queue, side_effect = gated()
    router.get("/rollout/r1/result").mock(side_effect=side_effect)
    handle = await admit(client, router, wire)
    waiters = [asyncio.create_task(handle.wait_for_running()) for _ in range(5)]
    grading = asyncio.create_task(handle.wait_for_grading())
    queue.put_nowait(wire.result("r1", "running"))
    assert await asyncio.gather(*waiters) == [RolloutStatus.RUNNING] * 5
    assert not grading.done()
    queue.put_nowait(wire.result("r1", "success"))
    assert await grading == RolloutStatus.SUCCESS


async def test_a_rollout_that_skips_grading_still_releases_wait_for_grading(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.get("/rollout/r1/result").mock(
        side_effect=[wire.result("r1", "running"), wire.result("r1", "success", sample=None)]
    )
    handle = await admit(client, router, wire)
    assert await handle.wait_for_grading() == RolloutStatus.SUCCESS


@pytest.mark.parametrize("terminal", ["failure", "cancelled"])
async def test_failure_and_cancelled_count_as_reached(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire], terminal: str
) -> None:
    router.get("/rollout/r1/result").mock(
        return_value=wire.result("r1", terminal, err_message="boom", err_category="agent_error")
    )
    handle = await admit(client, router, wire)
    assert await handle.wait_for_running() == terminal
    assert await handle.wait_for_grading() == terminal
    assert (await handle).err_message == "boom"


async def test_status_waits_raise_the_polling_error_when_polling_ends_first(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    router.get("/rollout/r1/result").mock(
        side_effect=[wire.result("r1", "queued"), httpx.Response(404, json={"detail": "x"})]
    )
    handle = await admit(client, router, wire)
    with pytest.raises(RolloutProtocolError) as caught:
        async with asyncio.timeout(5):
            await handle.wait_for_running()
    assert caught.value.status_code == 404
    assert handle.status == RolloutStatus.QUEUED


@pytest.mark.parametrize("status", [404, 403, 401, 422, 500, 400])
async def test_non_gateway_read_errors_fail_at_once(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire], status: int
) -> None:
    poll = router.get("/rollout/r1/result").mock(
        return_value=httpx.Response(status, json={"detail": "invalid polling lease"})
    )
    handle = await admit(client, router, wire)
    with pytest.raises(RolloutProtocolError) as caught:
        await handle
    assert caught.value.status_code == status
    assert poll.call_count == 1


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, content=b"<html>gateway</html>"),
        httpx.Response(200, json={"rollout_id": "r1", "status": "weird"}),
        httpx.Response(200, json={"rollout_id": "r2", "status": "success"}),
    ],
    ids=["not-json", "bad-status", "other-rollout-id"],
)
async def test_a_bad_result_body_is_a_protocol_error(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire], answer: httpx.Response
) -> None:
    poll = router.get("/rollout/r1/result").mock(return_value=answer)
    handle = await admit(client, router, wire)
    with pytest.raises(RolloutProtocolError):
        await handle
    assert poll.call_count == 1


async def test_gateway_errors_on_reads_are_retried_until_success(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    poll = router.get("/rollout/r1/result").mock(
        side_effect=[
            httpx.Response(502),
            httpx.Response(503),
            httpx.Response(504),
            wire.result("r1", "success"),
        ]
    )
    handle = await admit(client, router, wire)
    assert (await handle).status == RolloutStatus.SUCCESS
    assert poll.call_count == 4


@pytest.mark.parametrize(
    "error",
    [
        httpx.RemoteProtocolError("peer closed connection"),
        httpx.ReadError("connection reset"),
        httpx.ConnectError("refused"),
        httpx.ReadTimeout("slow"),
    ],
    ids=type,
)
async def test_dropped_connections_mid_poll_are_retried(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire], error: Exception
) -> None:
    poll = router.get("/rollout/r1/result").mock(
        side_effect=[wire.result("r1", "running"), error, wire.result("r1", "success")]
    )
    handle = await admit(client, router, wire)
    assert (await handle).status == RolloutStatus.SUCCESS
    assert poll.call_count == 3


async def test_transport_retries_give_up_after_two(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    poll = router.get("/rollout/r1/result").mock(side_effect=[dropped(), dropped(), dropped()])
    handle = await admit(client, router, wire)
    with pytest.raises(httpx.RemoteProtocolError):
        await handle
    assert poll.call_count == 3


@pytest.mark.parametrize(
    "error",
    [httpx.ConnectTimeout("c"), httpx.WriteTimeout("w"), httpx.PoolTimeout("p")],
    ids=type,
)
async def test_connect_write_and_pool_timeouts_are_not_retried(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire], error: Exception
) -> None:
    poll = router.get("/rollout/r1/result").mock(side_effect=error)
    handle = await admit(client, router, wire)
    with pytest.raises(type(error)):
        await handle
    assert poll.call_count == 1


async def test_retry_schedules_reset_after_each_success(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    poll = router.get("/rollout/r1/result").mock(
        side_effect=[
            dropped(),
            dropped(),
            wire.result("r1", "running"),
            dropped(),
            dropped(),
            wire.result("r1", "success"),
        ]
    )
    handle = await admit(client, router, wire)
    assert (await handle).status == RolloutStatus.SUCCESS
    assert poll.call_count == 6


async def test_transport_and_gateway_schedules_are_independent(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    poll = router.get("/rollout/r1/result").mock(
        side_effect=[dropped(), dropped(), httpx.Response(502), wire.result("r1", "success")]
    )
    handle = await admit(client, router, wire)
    assert (await handle).status == RolloutStatus.SUCCESS
    assert poll.call_count == 4


async def test_no_retry_that_could_not_finish_before_the_lease_deadline(
    router: respx.MockRouter, wire: type[Wire]
) -> None:
    # Read timeout 0.3 s, lease 1.5 s: the 0.25 s and 0.5 s retries fit, the 1 s one cannot.
    poll = router.get("/rollout/r1/result").mock(return_value=httpx.Response(502))
    async with RolloutClient(wire.base_url, result_read_grace_sec=0.1) as client:
        handle = await admit(client, router, wire, wait=0.2, lease=1.5)
        with pytest.raises(RolloutProtocolError) as caught:
            await handle
    assert caught.value.status_code == 502
    assert poll.call_count == 3


async def test_a_backoff_that_overruns_the_lease_ends_polling_without_another_read(
    router: respx.MockRouter, wire: type[Wire]
) -> None:
    # The loop stalls during the 0.25 s backoff until no read could finish within the lease:
    # the check after the sleep must stop the retry.
    def gateway_error_then_stall(request: httpx.Request) -> httpx.Response:
        asyncio.get_running_loop().call_later(0.05, time.sleep, 1.3)
        return httpx.Response(502)

    poll = router.get("/rollout/r1/result").mock(
        side_effect=[gateway_error_then_stall, wire.result("r1")]
    )
    async with RolloutClient(wire.base_url, result_read_grace_sec=0.1) as client:
        handle = await admit(client, router, wire, wait=0.2, lease=1.5)
        with pytest.raises(RolloutProtocolError) as caught:
            await handle
    assert caught.value.status_code == 502
    assert poll.call_count == 1


async def test_default_grace_leaves_no_room_to_retry_under_a_short_lease(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    # wait 1 s + 10 s grace > lease 5 s: even the first 0.1 s retry could outlive the lease.
    poll = router.get("/rollout/r1/result").mock(side_effect=[dropped(), wire.result("r1")])
    handle = await admit(client, router, wire, wait=1.0, lease=5.0)
    with pytest.raises(httpx.RemoteProtocolError):
        await handle
    assert poll.call_count == 1


async def test_a_hanging_retry_ends_at_the_lease_deadline_with_the_previous_error(
    router: respx.MockRouter, wire: type[Wire]
) -> None:
    sent: list[httpx.Request] = []

    async def drop_then_hang(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if len(sent) == 1:
            raise dropped()
        await asyncio.sleep(30)
        return wire.result("r1")

    router.get("/rollout/r1/result").mock(side_effect=drop_then_hang)
    async with RolloutClient(wire.base_url, result_read_grace_sec=0.1) as client:
        handle = await admit(client, router, wire, wait=0.2, lease=1.0)
        with pytest.raises(httpx.RemoteProtocolError) as caught:
            await handle
    assert len(sent) == 2
    assert isinstance(caught.value.__cause__, TimeoutError)


async def test_a_successful_read_renews_the_lease_deadline(
    router: respx.MockRouter, wire: type[Wire]
) -> None:
    # Polls keep answering "running" past the first lease deadline; a 502 after that is
    # still retried because each success moved the deadline to its send time + lease.
    answers: list[Any] = [wire.result("r1", "running") for _ in range(8)]
    answers += [httpx.Response(502), wire.result("r1", "success")]

    async def long_poll(request: httpx.Request) -> httpx.Response:
        answer = answers.pop(0)
        if answer.status_code == 200 and answers and answers[0].status_code == 200:
            await asyncio.sleep(0.15)
        return answer

    poll = router.get("/rollout/r1/result").mock(side_effect=long_poll)
    async with RolloutClient(wire.base_url, result_read_grace_sec=0.1) as client:
        handle = await admit(client, router, wire, wait=0.2, lease=1.0)
        first_deadline = handle.lease_deadline
        result = await handle
    assert result.status == RolloutStatus.SUCCESS
    assert poll.call_count == 10
    assert handle.lease_deadline > first_deadline + 0.5


async def test_handle_cancel_stops_local_polling_only(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire], gated: Gate
) -> None:
    _queue, side_effect = gated()
    router.get("/rollout/r1/result").mock(side_effect=side_effect)
    cancel = router.post("/rollout/cancel")
    handle = await admit(client, router, wire)
    waiter = asyncio.create_task(handle.wait_for_running())
    await asyncio.sleep(0.05)
    assert handle.cancel()
    with pytest.raises(asyncio.CancelledError):
        await handle
    assert handle.done()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not cancel.called


async def test_rollout_ids_are_percent_encoded_in_the_result_path(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    rollout_id = "row 1?#%"
    poll = router.get(url__regex=r"/result$").mock(return_value=wire.result(rollout_id))
    handle = await admit(client, router, wire, rollout_id)
    assert (await handle).rollout_id == rollout_id
    assert poll.calls.last.request.url.raw_path == b"/rollout/row%201%3F%23%25/result"


async def test_many_handles_poll_concurrently_over_one_client(
    router: respx.MockRouter, client: RolloutClient, wire: type[Wire]
) -> None:
    def admit_echo(request: httpx.Request) -> httpx.Response:
        rollout_id = httpx.Response(200, content=request.content).json()["rollout_id"]
        return wire.admitted(rollout_id)

    async def poll_echo(request: httpx.Request) -> httpx.Response:
        rollout_id = request.url.path.split("/")[2]
        await asyncio.sleep(0.05)
        return wire.result(rollout_id, "success", sample=None, err_message=rollout_id)

    router.post("/rollout").mock(side_effect=admit_echo)
    router.get(url__regex=r"/result$").mock(side_effect=poll_echo)
    handles = [await client.run_rollout_async(MESSAGES, POLICY, f"r{i}") for i in range(150)]
    results = await asyncio.gather(*handles)
    assert [r.err_message for r in results] == [f"r{i}" for i in range(150)]
