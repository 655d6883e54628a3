"""LiteLLMPolicy against a local OpenAI-compatible stub provider, on both of its routes.

An ``openai/`` model with a loopback ``api_base`` goes through the ``openai`` SDK; with
``force_litellm=True`` the same calls go through LiteLLM. Every behaviour is pinned on both.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import openai
import pytest
from openai import AsyncOpenAI

from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.policy import ChatRequest, LiteLLMPolicy

KEY = "sk-stub-0123456789abcdef"


async def _ask(server: PolicyServer, *, stream: bool, **kwargs: Any) -> dict[str, Any]:
    async with AsyncOpenAI(
        base_url=server.rollout_url("r1"), api_key=server.api_key, max_retries=0, timeout=30
    ) as client:
        if not stream:
            completion = await client.chat.completions.create(model="osmosis-rollout", **kwargs)
            return {
                "message": completion.choices[0].message.model_dump(exclude_none=True),
                "finish_reason": completion.choices[0].finish_reason,
                "usage": completion.usage.model_dump(exclude_none=True)
                if completion.usage
                else None,
            }
        content, usage, finish, calls = "", None, None, {}
        chunks = await client.chat.completions.create(
            model="osmosis-rollout", stream=True, stream_options={"include_usage": True}, **kwargs
        )
        async for chunk in chunks:
            if chunk.usage:
                usage = chunk.usage.model_dump(exclude_none=True)
            for choice in chunk.choices:
                content += choice.delta.content or ""
                finish = choice.finish_reason or finish
                for part in choice.delta.tool_calls or []:
                    call = calls.setdefault(part.index, {"name": "", "arguments": ""})
                    call["name"] += (part.function.name or "") if part.function else ""
                    call["arguments"] += (part.function.arguments or "") if part.function else ""
        return {
            "message": {"content": content, "tool_calls": list(calls.values())},
            "finish_reason": finish,
            "usage": usage,
        }


ROUTES = ["openai", "litellm"]
"""Each behaviour holds on both routes: the ``openai`` SDK (the default for an
OpenAI-compatible server) and LiteLLM (``force_litellm=True``, ``--osmosis-force-litellm``)."""


@pytest.fixture(params=ROUTES)
def route(request: pytest.FixtureRequest) -> str:
    """Which way the policy sends its calls."""
    return str(request.param)


def _policy(
    route: str, stub: Any, model: str = "openai/stub-model", **params: Any
) -> LiteLLMPolicy:
    policy = LiteLLMPolicy(
        model,
        api_base=stub.base_url,
        api_key=KEY,
        force_litellm=route == "litellm",
        **params,
    )
    assert policy.route == route
    return policy


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_litellm_policy_answers_through_the_endpoint(
    serve: Callable[..., PolicyServer], stub_provider: Any, stream: bool, route: str
) -> None:
    server = serve(_policy(route, stub_provider))
    reply = await _ask(server, stream=stream, messages=[{"role": "user", "content": "hello"}])
    assert reply["message"]["content"] == "stub says hi"
    assert reply["finish_reason"] == "stop"
    assert reply["usage"]["prompt_tokens"] == 7 and reply["usage"]["completion_tokens"] == 3
    log = server.log("r1")
    assert (log.prompt_tokens, log.completion_tokens, log.tokens_estimated) == (7, 3, False)
    [sent] = stub_provider.requests
    assert sent["model"] == "stub-model"
    assert sent["messages"] == [{"role": "user", "content": "hello"}]
    if route == "openai":
        assert bool(sent.get("stream")) is stream, "the provider streams when the request does"
        if stream:
            assert sent["stream_options"] == {"include_usage": True}
    else:
        assert not sent.get("stream"), "LiteLLM calls the provider without streaming"
    assert stub_provider.headers[0]["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_litellm_policy_forwards_tools_and_sampling_params(
    serve: Callable[..., PolicyServer],
    stub_provider: Any,
    tools: dict[str, Any],
    route: str,
    stream: bool,
) -> None:
    stub_provider.reply = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_provider_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
        ],
    }
    stub_provider.finish_reason = "tool_calls"
    server = serve(_policy(route, stub_provider))
    reply = await _ask(
        server,
        stream=stream,
        messages=[{"role": "user", "content": "2+3?"}],
        tools=[tools["add"]],
        tool_choice="auto",
        temperature=0.3,
        top_p=0.8,
        max_tokens=50,
        stop=["END"],
        seed=11,
        extra_body={"api_base": "http://evil.invalid", "litellm_logging_obj": "x"},
    )
    assert reply["finish_reason"] == "tool_calls"
    calls = [
        {"name": call["function"]["name"], "arguments": call["function"]["arguments"]}
        if "function" in call
        else call
        for call in reply["message"]["tool_calls"]
    ]
    assert calls == [{"name": "add", "arguments": '{"a": 2, "b": 3}'}]
    [sent] = stub_provider.requests
    assert sent["tools"][0]["function"]["name"] == "add"
    assert sent["tool_choice"] == "auto"
    assert (sent["temperature"], sent["top_p"], sent["seed"]) == (0.3, 0.8, 11)
    assert sent["stop"] == ["END"]
    assert 50 in (sent.get("max_tokens"), sent.get("max_completion_tokens"))
    assert "api_base" not in sent and "litellm_logging_obj" not in sent
    [call] = server.log("r1").calls
    assert call.reply is not None and call.reply["tool_calls"][0]["id"] == "call_provider_1"


async def test_a_rate_limit_is_retried_after_the_wait_the_provider_asks_for(
    serve: Callable[..., PolicyServer], stub_provider: Any, route: str
) -> None:
    stub_provider.fail_first = 1
    stub_provider.retry_after = {"retry-after": "1"}
    server = serve(_policy(route, stub_provider, num_retries=2))
    reply = await _ask(server, stream=True, messages=[{"role": "user", "content": "hello"}])
    assert reply["message"]["content"] == "stub says hi"
    assert stub_provider.calls == 2
    first, second = stub_provider.arrivals
    # A lower bound only: the backoff without Retry-After would be at most 0.5 s.
    assert second - first >= 0.9, "the retry waited for the Retry-After the provider sent"
    assert server.log("r1").n_errors == 0


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_a_server_error_is_retried_then_fails_as_an_internal_server_error(
    serve: Callable[..., PolicyServer], stub_provider: Any, route: str, stream: bool
) -> None:
    stub_provider.fail_first = 100
    stub_provider.fail_status = 500
    server = serve(_policy(route, stub_provider, num_retries=1))
    async with AsyncOpenAI(
        base_url=server.rollout_url("r1"), api_key=server.api_key, max_retries=0, timeout=30
    ) as client:
        with pytest.raises(openai.APIError) as caught:
            chunks = await client.chat.completions.create(
                model="osmosis-rollout",
                messages=[{"role": "user", "content": "hello"}],
                stream=stream,
            )
            async for _ in chunks:  # type: ignore[union-attr]
                pass
    assert stub_provider.calls >= 2, "the failed call was retried"
    if route == "openai":
        assert stub_provider.calls == 2, "num_retries=1: one retry"
    if not stream:
        assert getattr(caught.value, "status_code", None) == 502
    assert "InternalServerError" in str(caught.value)
    [call] = server.log("r1").calls
    assert (call.error or "").startswith("InternalServerError")
    assert call.status_code == (200 if stream else 502)
    assert KEY not in (call.error or "") and KEY not in str(caught.value)


async def test_provider_rate_limit_without_retries_keeps_its_status(
    serve: Callable[..., PolicyServer], stub_provider: Any, route: str
) -> None:
    stub_provider.fail_first = 5
    server = serve(_policy(route, stub_provider, num_retries=0, max_retries=0))
    async with AsyncOpenAI(
        base_url=server.rollout_url("r1"), api_key=server.api_key, max_retries=0, timeout=30
    ) as client:
        with pytest.raises(Exception) as caught:
            await client.chat.completions.create(
                model="osmosis-rollout", messages=[{"role": "user", "content": "hello"}]
            )
    assert getattr(caught.value, "status_code", None) == 429
    assert stub_provider.calls == 1
    [call] = server.log("r1").calls
    assert call.status_code == 429 and "slow down" in (call.error or "")
    assert (call.error or "").startswith("RateLimitError")
    assert KEY not in json.dumps(call.error)


async def test_the_provider_key_is_never_in_any_output(
    serve: Callable[..., PolicyServer],
    stub_provider: Any,
    route: str,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    policy = _policy(route, stub_provider, num_retries=1)
    server = serve(policy)
    await _ask(server, stream=False, messages=[{"role": "user", "content": "hello"}])
    stub_provider.fail_first, stub_provider.fail_status = 100, 500
    with pytest.raises(openai.APIError):
        await _ask(server, stream=False, messages=[{"role": "user", "content": "again"}])
    assert stub_provider.headers[0]["authorization"] == f"Bearer {KEY}", "the key was sent"
    captured = capsys.readouterr()
    outputs = [
        caplog.text,
        captured.out,
        captured.err,
        repr(policy),
        repr(server),
        json.dumps([call.error for call in server.log("r1").calls]),
        json.dumps([call.request for call in server.log("r1").calls]),
    ]
    for output in outputs:
        assert KEY not in output


def test_build_kwargs_lets_request_params_override_defaults_but_not_credentials() -> None:
    policy = LiteLLMPolicy("openai/m", temperature=0, api_base="http://x", num_retries=3)
    request = ChatRequest(
        messages=[{"role": "user", "content": "hi"}],
        tools=[],
        params={"temperature": 0.5, "api_base": "http://evil", "_secret": 1, "tool_choice": "auto"},
        rollout_id="r",
    )
    kwargs = policy.build_kwargs(request)
    assert kwargs["temperature"] == 0.5
    assert kwargs["api_base"] == "http://x"
    assert kwargs["num_retries"] == 3
    assert "_secret" not in kwargs
    assert "tool_choice" not in kwargs, "tool_choice without tools is rejected by providers"
    assert kwargs["model"] == "openai/m" and kwargs["stream"] is False


def test_model_id_needs_a_provider_prefix() -> None:
    with pytest.raises(ValueError, match="openai/gpt-5-mini"):
        LiteLLMPolicy("gpt-5-mini")


async def test_litellm_reports_the_cost_of_a_model_it_can_price(
    serve: Callable[..., PolicyServer], stub_provider: Any, route: str
) -> None:
    import litellm

    server = serve(_policy(route, stub_provider, model="openai/gpt-4o-mini"))
    await _ask(server, stream=False, messages=[{"role": "user", "content": "hello"}])
    prices = litellm.model_cost["gpt-4o-mini"]
    expected = 7 * prices["input_cost_per_token"] + 3 * prices["output_cost_per_token"]
    log = server.log("r1")
    assert log.reported_cost == pytest.approx(expected)
    cost = log.cost()
    assert cost is not None and cost.source == "provider" and not cost.estimated


async def test_a_model_litellm_cannot_price_has_no_cost(
    serve: Callable[..., PolicyServer], stub_provider: Any, route: str
) -> None:
    server = serve(_policy(route, stub_provider))
    await _ask(server, stream=False, messages=[{"role": "user", "content": "hello"}])
    assert server.log("r1").reported_cost is None
