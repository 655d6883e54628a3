"""A rollout's model call that fails retries and raises as the official SDK's does (issue 34, 1).

The official integrations call ``litellm.acompletion``, which sends through the ``openai``
SDK: a 429 or 5xx is retried twice (three requests in all), honouring ``Retry-After``, and
what is left raises LiteLLM's exceptions, which subclass the ``openai`` SDK's. User code
that catches ``openai.RateLimitError`` (or ``litellm.RateLimitError``) must keep matching, and
a transient 429 must not fail the rollout. Pinned here on a real PolicyServer on loopback
that injects the faults, for both frameworks, streamed and plain; the same snippets run on
the official SDK beside ours in ``tests/interop/test_model_errors_differential.py``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import litellm
import openai
import pytest
from agents import Runner
from integrations.support import rollout_context

from osmosis_rollout._internal.shortcuts import ENV_VAR
from osmosis_rollout.context import RolloutContext
from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.integrations.agents.openai_agents import (
    OsmosisAgent,
    OsmosisMemorySession,
    OsmosisRolloutModel,
)
from osmosis_rollout.integrations.agents.strands import (
    OsmosisRolloutModel as StrandsRolloutModel,
)
from osmosis_rollout.integrations.agents.strands import OsmosisStrandsAgent
from osmosis_rollout.policy import Faults

REQUESTS_PER_CALL = 3
"""One request and the ``openai`` SDK's two retries (LiteLLM leaves retrying to it)."""


async def ask_openai_agents(server: PolicyServer, *, streaming: bool) -> str:
    with rollout_context(server):
        agent = OsmosisAgent(name="a", model=OsmosisRolloutModel(streaming=streaming))
        result = await Runner.run(agent, "Say hello.", session=OsmosisMemorySession())
    return str(result.final_output)


async def ask_strands(server: PolicyServer, *, streaming: bool) -> str:
    with rollout_context(server):
        agent = OsmosisStrandsAgent(model=StrandsRolloutModel(streaming=streaming))
        result = await agent.invoke_async("Say hello.")
    return str(result)


ASK = {"openai-agents": ask_openai_agents, "strands": ask_strands}


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "plain"])
@pytest.mark.parametrize("framework", sorted(ASK))
async def test_a_429_then_a_reply_is_retried_and_the_rollout_goes_on(
    serve_policy: Callable[..., PolicyServer], framework: str, streaming: bool
) -> None:
    server = serve_policy("hello there", faults=Faults(fail_first=1, fail_status=429))
    answer = await ASK[framework](server, streaming=streaming)
    assert "hello there" in answer
    assert [call.status_code for call in server.log("r1").calls] == [429, 200]


@pytest.mark.parametrize("streaming", [True, False], ids=["streamed", "plain"])
@pytest.mark.parametrize("framework", sorted(ASK))
async def test_a_500_on_every_try_raises_litellms_internal_server_error(
    serve_policy: Callable[..., PolicyServer], framework: str, streaming: bool
) -> None:
    server = serve_policy("unused", faults=Faults(fail_first=10, fail_status=500))
    with pytest.raises(openai.InternalServerError) as caught:
        await ASK[framework](server, streaming=streaming)
    assert isinstance(caught.value, litellm.InternalServerError)
    assert caught.value.status_code == 500
    assert len(server.log("r1").calls) == REQUESTS_PER_CALL


async def test_a_429_on_every_try_raises_litellms_rate_limit_error(
    serve_policy: Callable[..., PolicyServer],
) -> None:
    server = serve_policy("unused", faults=Faults(fail_first=10, fail_status=429))
    with pytest.raises(openai.RateLimitError) as caught:
        await ask_openai_agents(server, streaming=True)
    assert isinstance(caught.value, litellm.RateLimitError)
    assert len(server.log("r1").calls) == REQUESTS_PER_CALL


async def raise_on_both_paths(
    start: Callable[[], PolicyServer], monkeypatch: pytest.MonkeyPatch
) -> list[tuple[type[BaseException], str, int]]:
    """What a failing call raises on the lean path, then through ``litellm.acompletion``
    (each against its own server from ``start``, so their messages may be compared)."""
    seen = []
    for switch in ("0", "1"):
        monkeypatch.setenv(ENV_VAR, switch)
        server = start()
        with pytest.raises(openai.APIError) as caught:
            await ask_openai_agents(server, streaming=switch == "0")
        seen.append((type(caught.value), str(caught.value), len(server.log("r1").calls)))
    return seen


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_the_lean_path_fails_as_litellm_does(
    serve_policy: Callable[..., PolicyServer], monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    faults = Faults(fail_first=100, fail_status=status)
    lean, litellm_path = await raise_on_both_paths(
        lambda: serve_policy("unused", faults=faults), monkeypatch
    )
    assert lean == litellm_path
    assert lean[2] == REQUESTS_PER_CALL


async def test_an_endpoint_that_refuses_connections_fails_as_litellm_does(
    serve_policy: Callable[..., PolicyServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = serve_policy("unused")
    url, key = server.rollout_url("r1"), server.api_key
    server.stop()  # the port is closed now: every try is refused
    seen = []
    for switch in ("0", "1"):
        monkeypatch.setenv(ENV_VAR, switch)
        context = RolloutContext(chat_completions_url=url, api_key=key, rollout_id="r1")
        with context, pytest.raises(openai.APIError) as caught:
            agent = OsmosisAgent(name="a", model=OsmosisRolloutModel(streaming=False))
            await Runner.run(agent, "Say hello.", session=OsmosisMemorySession())
        seen.append((type(caught.value), str(caught.value)))
    assert seen[0] == seen[1]
    assert type(caught.value).__module__.startswith("litellm")


async def test_retry_after_is_waited_out_before_the_next_try(
    serve_policy: Callable[..., PolicyServer],
) -> None:
    # The openai SDK's own back-off before its first retry is at most 0.5 s; Retry-After: 2
    # must hold the retry back at least two seconds.
    server = serve_policy("hello there", faults=Faults(fail_first=1, retry_after_s=2))
    started = time.monotonic()
    await ask_openai_agents(server, streaming=False)
    assert time.monotonic() - started >= 2.0
    assert [call.status_code for call in server.log("r1").calls] == [429, 200]
