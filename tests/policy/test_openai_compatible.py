"""Which calls go through the ``openai`` SDK, and the one pooled client they share."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from osmosis_rollout.policy import ChatRequest, LiteLLMPolicy
from osmosis_rollout.policy.openai_compatible import openai_route
from osmosis_rollout.transport.connection_pools import pool_sizes

KEY = "sk-stub-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_provider_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OPENAI_BASE_URL",
        "OPENAI_API_BASE",
        "OPENAI_API_KEY",
        "OPENAI_ORGANIZATION",
        "HOSTED_VLLM_API_BASE",
        "HOSTED_VLLM_API_KEY",
        "LITELLM_PROXY_API_BASE",
        "LITELLM_PROXY_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)


def _request(content: str = "hello", **params: Any) -> ChatRequest:
    return ChatRequest(
        messages=[{"role": "user", "content": content}], tools=[], params=params, rollout_id="r"
    )


@pytest.mark.parametrize(
    ("model", "params", "expected"),
    [
        ("openai/qwen3", {"api_base": "http://127.0.0.1:8000/v1", "api_key": "k"}, "openai"),
        ("openai/qwen3", {"base_url": "http://10.0.0.5/v1", "api_key": "k"}, "openai"),
        ("hosted_vllm/qwen3", {"api_base": "http://127.0.0.1:8000/v1"}, "openai"),
        ("litellm_proxy/qwen3", {"api_base": "http://127.0.0.1:4000", "api_key": "k"}, "openai"),
        ("openai/gpt-5-mini", {"api_key": "k"}, "litellm"),
        ("openai/gpt-5-mini", {"api_base": "https://api.openai.com/v1", "api_key": "k"}, "litellm"),
        ("openai/qwen3", {"api_base": "http://127.0.0.1:8000/v1"}, "litellm"),
        ("anthropic/claude-sonnet-4-5", {"api_base": "http://127.0.0.1/v1"}, "litellm"),
        ("ollama/llama3", {"api_base": "http://127.0.0.1:11434"}, "litellm"),
        (
            "openai/qwen3",
            {"api_base": "http://127.0.0.1/v1", "api_key": "k", "mock_response": "hi"},
            "litellm",
        ),
        (
            "openai/qwen3",
            {"api_base": "http://127.0.0.1/v1", "api_key": "k", "force_litellm": True},
            "litellm",
        ),
    ],
    ids=[
        "openai-api-base",
        "openai-base-url",
        "hosted-vllm",
        "litellm-proxy",
        "openai-own-api-default",
        "openai-own-api-explicit",
        "openai-without-key",
        "anthropic",
        "ollama",
        "litellm-only-param",
        "forced",
    ],
)
def test_only_openai_compatible_servers_of_your_own_skip_litellm(
    model: str, params: dict[str, Any], expected: str
) -> None:
    assert LiteLLMPolicy(model, **params).route == expected


def test_the_base_url_and_key_come_from_the_providers_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1/")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    route = openai_route("openai/qwen3", {})
    assert route is not None
    assert (route.base_url, route.api_key, route.model) == ("http://127.0.0.1:9/v1", KEY, "qwen3")
    assert KEY not in repr(route)
    monkeypatch.setenv("HOSTED_VLLM_API_BASE", "http://127.0.0.1:8/v1")
    vllm = openai_route("hosted_vllm/org/model-7b", {})
    assert vllm is not None
    assert (vllm.base_url, vllm.api_key, vllm.model) == (
        "http://127.0.0.1:8/v1",
        "fake-api-key",
        "org/model-7b",
    )


def test_retries_and_timeout_follow_the_litellm_parameters() -> None:
    base = {"api_base": "http://127.0.0.1/v1", "api_key": "k"}
    assert openai_route("openai/m", base).max_retries == 2  # type: ignore[union-attr]
    assert openai_route("openai/m", {**base, "max_retries": 5}).max_retries == 5  # type: ignore[union-attr]
    route = openai_route("openai/m", {**base, "num_retries": 1, "max_retries": 5, "timeout": 7})
    assert route is not None and (route.max_retries, route.timeout_s) == (1, 7.0)
    with pytest.raises(ValueError, match="num_retries"):
        openai_route("openai/m", {**base, "num_retries": -1})
    with pytest.raises(ValueError, match="max_connections"):
        LiteLLMPolicy("openai/m", max_connections=0, **base)


@pytest.mark.parametrize("provider", ["openai", "hosted_vllm", "litellm_proxy"])
async def test_both_routes_send_the_provider_the_same_body(
    stub_provider: Any, tools: dict[str, Any], provider: str
) -> None:
    request = ChatRequest(
        messages=[
            {"role": "system", "content": "Add with the tool."},
            {"role": "user", "content": "2+3?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "5"},
        ],
        tools=[tools["add"], tools["mul"]],
        params={
            "temperature": 0.3,
            "top_p": 0.8,
            "max_tokens": 50,
            "stop": ["END"],
            "seed": 11,
            "tool_choice": "auto",
            "parallel_tool_calls": False,
            "response_format": {"type": "json_object"},
            "top_k": 5,
        },
        rollout_id="r",
    )
    for force_litellm in (False, True):
        policy = LiteLLMPolicy(
            f"{provider}/stub-model",
            api_base=stub_provider.base_url,
            api_key=KEY,
            force_litellm=force_litellm,
        )
        assert policy.route == ("litellm" if force_litellm else "openai")
        reply = await policy.complete(request)
        assert reply.content == "stub says hi"
    direct, through_litellm = stub_provider.requests
    through_litellm.pop("stream", None)  # LiteLLM may spell out "stream": false
    assert direct == through_litellm


def test_vllm_gets_the_request_fixes_litellm_applies(tools: dict[str, Any]) -> None:
    policy = LiteLLMPolicy("hosted_vllm/m", api_base="http://127.0.0.1/v1")
    request = ChatRequest(
        messages=[
            {"role": "user", "content": "2+3?", "name": None},
            {"role": "assistant", "content": "thinking", "thinking_blocks": [{"x": 1}]},
        ],
        tools=[tools["add"]],
        params={"temperature": 0.2, "drop_params": True},
        rollout_id="r",
    )
    assert policy._openai is not None
    body = policy._openai.body(policy.build_kwargs(request))
    assert body["model"] == "m"
    assert body["messages"] == [
        {"role": "user", "content": "2+3?"},
        {"role": "assistant", "content": "thinking"},
    ]
    function = body["tools"][0]["function"]
    assert "strict" not in function and "additionalProperties" not in function["parameters"]
    assert body["temperature"] == 0.2 and "drop_params" not in body and "stream" not in body


@pytest.mark.parametrize(("size", "calls"), [(3, 12), (20, 60)], ids=["one-pool", "two-pools"])
async def test_one_client_bounded_by_max_connections_serves_every_call(
    stub_provider: Any, size: int, calls: int
) -> None:
    stub_provider.latency_s = 0.05
    policy = LiteLLMPolicy(
        "openai/stub-model", api_base=stub_provider.base_url, api_key=KEY, max_connections=size
    )
    replies = await asyncio.gather(*(policy.complete(_request(f"q{i}")) for i in range(calls)))
    assert [reply.content for reply in replies] == ["stub says hi"] * calls
    assert stub_provider.max_in_flight <= size, "no more calls in flight than connections"
    assert len(set(stub_provider.peers)) <= size, "connections are reused, not opened per call"
    await policy.complete(_request("once more"))
    assert stub_provider.peers[-1] in stub_provider.peers[:-1], "a later call reuses a connection"


def test_connections_are_split_over_pools_of_sixteen() -> None:
    assert pool_sizes(3) == [3]
    assert pool_sizes(20) == [16, 4]
    assert pool_sizes(256) == [16] * 16
