"""Each injected fault, observed by a real client on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.policy import Faults

MESSAGES = [{"role": "user", "content": "hi"}]
TEXT = "A reply long enough to be streamed over several content chunks, as models do."


def _client(server: PolicyServer, rollout_id: str, **kwargs: object) -> AsyncOpenAI:
    options: dict[str, object] = {"max_retries": 0, "timeout": 10.0}
    options.update(kwargs)
    return AsyncOpenAI(
        base_url=server.rollout_url(rollout_id),
        api_key=server.api_key,
        **options,  # type: ignore[arg-type]
    )


async def test_rate_limit_for_the_first_calls_is_retried_by_the_client(
    serve: Callable[..., PolicyServer],
) -> None:
    server = serve(TEXT, faults=Faults(fail_first=2, fail_status=429))
    async with _client(server, "r1", max_retries=3) as client:
        completion = await client.chat.completions.create(
            model="osmosis-rollout", messages=MESSAGES
        )
    assert completion.choices[0].message.content == TEXT
    log = server.log("r1")
    assert [c.status_code for c in log.calls] == [429, 429, 200]
    assert log.n_errors == 2


@pytest.mark.parametrize("status", [429, 500])
async def test_failing_status_reaches_a_client_that_does_not_retry(
    serve: Callable[..., PolicyServer], status: int
) -> None:
    server = serve(TEXT, faults=Faults(fail_first=1, fail_status=status))
    async with _client(server, "r1") as client:
        with pytest.raises(openai.APIStatusError) as caught:
            await client.chat.completions.create(model="osmosis-rollout", messages=MESSAGES)
        assert caught.value.status_code == status
        # Only the first call fails.
        completion = await client.chat.completions.create(
            model="osmosis-rollout", messages=MESSAGES
        )
        assert completion.choices[0].message.content == TEXT


async def test_added_latency_is_part_of_the_call(serve: Callable[..., PolicyServer]) -> None:
    server = serve(TEXT, faults=Faults(latency_s=0.3))
    async with _client(server, "r1") as client:
        completion = await client.chat.completions.create(
            model="osmosis-rollout", messages=MESSAGES
        )
    assert completion.choices[0].message.content == TEXT
    assert server.log("r1").calls[0].latency_s >= 0.3


async def test_cut_stream_breaks_the_client_mid_body(serve: Callable[..., PolicyServer]) -> None:
    server = serve(TEXT, faults=Faults(cut_stream=True))
    received: list[str] = []
    async with _client(server, "r1") as client:
        stream = await client.chat.completions.create(
            model="osmosis-rollout", messages=MESSAGES, stream=True
        )
        with pytest.raises((httpx.RemoteProtocolError, openai.APIConnectionError)):
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    received.append(chunk.choices[0].delta.content)
    assert received, "some chunks arrive before the cut"
    assert "".join(received) != TEXT


async def test_malformed_chunk_fails_the_client_parse(serve: Callable[..., PolicyServer]) -> None:
    server = serve(TEXT, faults=Faults(malformed_chunk=True))
    async with _client(server, "r1") as client:
        stream = await client.chat.completions.create(
            model="osmosis-rollout", messages=MESSAGES, stream=True
        )
        with pytest.raises(json.JSONDecodeError):
            async for _ in stream:
                pass


async def test_hang_outlasts_the_client_timeout_and_stop_is_not_pinned(
    serve: Callable[..., PolicyServer],
) -> None:
    server = serve(TEXT, faults=Faults(hang_s=60, only_calls=frozenset({1})))
    async with _client(server, "r1", timeout=0.3) as client:
        with pytest.raises(openai.APITimeoutError):
            await client.chat.completions.create(model="osmosis-rollout", messages=MESSAGES)
        # The fault targets call 1 only: the next call is answered.
        async with _client(server, "r1") as patient:
            completion = await patient.chat.completions.create(
                model="osmosis-rollout", messages=MESSAGES
            )
        assert completion.choices[0].message.content == TEXT
    server.faults = Faults(hang_s=60)
    async with httpx.AsyncClient(timeout=0.2) as raw:
        with pytest.raises(httpx.ReadTimeout):
            await raw.post(
                server.rollout_url("r2") + "/chat/completions",
                json={"messages": MESSAGES},
                headers={"Authorization": f"Bearer {server.api_key}"},
            )
    server.stop()  # releases the hung call instead of waiting 60 s
    with pytest.raises(RuntimeError):
        _ = server.base_url
