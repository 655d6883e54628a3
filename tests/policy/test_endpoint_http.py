"""The endpoint's HTTP contract: auth, validation, error shapes, SSE layout, accounting, lifecycle."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.errors import PolicyError
from osmosis_rollout.policy import ChatReply, ChatRequest, ToolCall, Usage

BODY = {"model": "osmosis-rollout", "messages": [{"role": "user", "content": "hi"}]}
PATH = "/v1/rollouts/r1/chat/completions"


@pytest.fixture
async def in_process() -> AsyncIterator[Callable[[PolicyServer], httpx.AsyncClient]]:
    """httpx clients talking to a server's app in-process (no socket)."""
    clients: list[httpx.AsyncClient] = []

    def make(server: PolicyServer) -> httpx.AsyncClient:
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=server.app),
            base_url="http://policy",
            headers={"Authorization": f"Bearer {server.api_key}"},
        )
        clients.append(client)
        return client

    yield make
    for client in clients:
        await client.aclose()


@pytest.mark.parametrize(
    "header",
    [None, "Bearer wrong", "Basic abc", "token-without-scheme"],
    ids=["missing", "wrong-key", "wrong-scheme", "no-scheme"],
)
async def test_calls_without_the_bearer_are_refused_with_401(
    in_process: Callable[[PolicyServer], httpx.AsyncClient], header: str | None
) -> None:
    server = PolicyServer("hi")
    client = in_process(server)
    headers = {"Authorization": header} if header else {}
    if header is None:
        client.headers.pop("Authorization")
    response = await client.post(PATH, json=BODY, headers=headers)
    assert response.status_code == 401
    assert response.json()["error"]["message"] == "Unauthorized"
    assert server.log("r1").n_calls == 0


async def test_bearer_scheme_is_case_insensitive(
    in_process: Callable[[PolicyServer], httpx.AsyncClient],
) -> None:
    server = PolicyServer("hi", api_key="k-123")
    response = await in_process(server).post(
        PATH, json=BODY, headers={"Authorization": "bEaReR k-123"}
    )
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "hi"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"model": "m"}, "'messages' is required"),
        ({"messages": "hi"}, "'messages' must be a list"),
        ({"messages": []}, "at least one message"),
        ({"messages": ["hi"]}, "messages[0] must be an object"),
        ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role must be one of"),
        ({**BODY, "n": 2}, "'n' must be 1"),
        ({**BODY, "tools": [{"type": "function"}]}, "tools[0].function.name is required"),
        ({**BODY, "stream": "yes"}, "'stream' must be a boolean"),
    ],
)
async def test_bad_bodies_get_400_naming_the_problem(
    in_process: Callable[[PolicyServer], httpx.AsyncClient], body: dict[str, Any], fragment: str
) -> None:
    response = await in_process(PolicyServer("hi")).post(PATH, json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert fragment in error["message"]
    assert error["type"] == "invalid_request_error"


@pytest.mark.parametrize("content", [b"[1, 2]", b'"text"', b"not json"])
async def test_non_object_body_gets_400(
    in_process: Callable[[PolicyServer], httpx.AsyncClient], content: bytes
) -> None:
    response = await in_process(PolicyServer("hi")).post(
        PATH, content=content, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["detail"]


@pytest.mark.parametrize("raw_id", ["a%5Cb", "%00x", "%2E%2E"])
async def test_rollout_id_that_is_not_one_path_segment_gets_422(
    in_process: Callable[[PolicyServer], httpx.AsyncClient], raw_id: str
) -> None:
    client = in_process(PolicyServer("hi"))
    request = client.build_request("POST", "/v1/rollouts/x/chat/completions", json=BODY)
    request.url = request.url.copy_with(raw_path=f"/v1/rollouts/{raw_id}/chat/completions".encode())
    response = await client.send(request)
    assert response.status_code == 422
    assert "invalid rollout_id" in response.json()["detail"]


async def test_policy_sees_params_tools_model_and_the_bound_row(
    in_process: Callable[[PolicyServer], httpx.AsyncClient],
) -> None:
    seen: list[ChatRequest] = []

    async def policy(request: ChatRequest) -> str:
        seen.append(request)
        return "ok"

    server = PolicyServer(policy)
    server.bind("r1", row={"id": 7, "user_prompt": "hi"}, row_key="row-7", attempt=2)
    tool = {"type": "function", "function": {"name": "f", "parameters": {}}, "strict": True}
    body = {
        **BODY,
        "stream": True,
        "stream_options": {"include_usage": True},
        "n": 1,
        "tools": [tool],
        "tool_choice": "auto",
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 64,
        "stop": ["\n"],
        "seed": 3,
        "response_format": {"type": "text"},
        "parallel_tool_calls": False,
    }
    response = await in_process(server).post(PATH, json=body)
    assert response.status_code == 200
    [request] = seen
    assert request.params == {
        "tool_choice": "auto",
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 64,
        "stop": ["\n"],
        "seed": 3,
        "response_format": {"type": "text"},
        "parallel_tool_calls": False,
    }
    assert request.tools == [tool]
    assert request.model == "osmosis-rollout" and request.stream is True
    assert (request.rollout_id, request.row_key, request.attempt) == ("r1", "row-7", 2)
    assert request.row == {"id": 7, "user_prompt": "hi"}


async def test_policy_failure_is_a_502_with_an_openai_error_body(
    in_process: Callable[[PolicyServer], httpx.AsyncClient],
) -> None:
    def broken(request: ChatRequest) -> str:
        raise RuntimeError("the model fell over")

    server = PolicyServer(broken)
    response = await in_process(server).post(PATH, json=BODY)
    assert response.status_code == 502
    body = response.json()
    assert body["error"]["code"] == 502
    assert body["error"]["type"] == "policy_error"
    assert "the model fell over" in body["error"]["message"]
    assert body["detail"] == body["error"]["message"]
    [call] = server.log("r1").calls
    assert call.error is not None and "the model fell over" in call.error
    assert call.status_code == 502 and call.reply is None


async def test_policy_failure_inside_a_stream_is_an_error_event_then_done(
    in_process: Callable[[PolicyServer], httpx.AsyncClient],
    parse_sse: Callable[[str], list[tuple[str | None, str]]],
) -> None:
    async def broken(request: ChatRequest) -> str:
        raise PolicyError("no more budget")

    response = await in_process(PolicyServer(broken)).post(PATH, json={**BODY, "stream": True})
    assert response.status_code == 200
    events = parse_sse(response.text)
    assert events[0][0] == "error"
    assert "no more budget" in json.loads(events[0][1])["error"]["message"]
    assert events[-1] == (None, "[DONE]")


async def test_secrets_in_a_policy_error_are_redacted(
    in_process: Callable[[PolicyServer], httpx.AsyncClient], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_PROVIDER_API_KEY", "sk-very-secret-value")

    def leaky(request: ChatRequest) -> str:
        raise RuntimeError("auth failed for key sk-very-secret-value")

    response = await in_process(PolicyServer(leaky)).post(PATH, json=BODY)
    assert "sk-very-secret-value" not in response.text
    assert "[REDACTED]" in response.json()["detail"]


async def test_stream_layout_matches_a_real_provider(
    in_process: Callable[[PolicyServer], httpx.AsyncClient],
    parse_sse: Callable[[str], list[tuple[str | None, str]]],
) -> None:
    reply = ChatReply(
        content="Let me add these numbers for you.",
        tool_calls=[ToolCall("add", {"a": 2, "b": 3}, id="call_1")],
        finish_reason="tool_calls",
        usage=Usage(11, 5),
    )
    body = {**BODY, "model": "my-model", "stream": True, "stream_options": {"include_usage": True}}
    response = await in_process(PolicyServer(reply)).post(PATH, json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    assert events[-1] == (None, "[DONE]")
    chunks = [json.loads(data) for _, data in events[:-1]]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert {c["model"] for c in chunks} == {"my-model"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    text = [d["content"] for d in deltas[1:] if d.get("content")]
    assert len(text) > 1 and "".join(text) == reply.content
    tool_parts = [part for d in deltas for part in d.get("tool_calls", [])]
    assert tool_parts[0] == {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "add", "arguments": ""},
    }
    assert all(p["index"] == 0 and set(p) == {"index", "function"} for p in tool_parts[1:])
    assert len(tool_parts) > 2
    assert json.loads("".join(p["function"]["arguments"] for p in tool_parts)) == {"a": 2, "b": 3}
    finish = [c for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert [c["choices"][0]["finish_reason"] for c in finish] == ["tool_calls"]
    assert finish[0]["choices"][0]["delta"] == {}
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}


async def test_policy_usage_is_counted_exactly_and_release_pops_the_log(
    in_process: Callable[[PolicyServer], httpx.AsyncClient],
) -> None:
    server = PolicyServer(ChatReply("ok", usage=Usage(10, 2)))
    client = in_process(server)
    for _ in range(3):
        assert (await client.post(PATH, json=BODY)).status_code == 200
    await client.post("/v1/rollouts/other/chat/completions", json=BODY)
    log = server.log("r1")
    assert (log.n_calls, log.prompt_tokens, log.completion_tokens) == (3, 30, 6)
    assert log.total_tokens == 36 and not log.tokens_estimated
    assert log.calls[0].reply == {
        "content": "ok",
        "tool_calls": [],
        "finish_reason": "stop",
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 2,
            "total_tokens": 12,
            "estimated": False,
        },
    }
    released = server.release("r1")
    assert released.n_calls == 3
    assert server.log("r1").n_calls == 0
    assert server.log("other").n_calls == 1


async def test_sequence_policy_answers_each_rollout_in_order(
    in_process: Callable[[PolicyServer], httpx.AsyncClient],
) -> None:
    server = PolicyServer(["first", "second"])
    client = in_process(server)

    async def content(rollout: str) -> str:
        response = await client.post(f"/v1/rollouts/{rollout}/chat/completions", json=BODY)
        return str(response.json()["choices"][0]["message"]["content"])

    assert [await content("a"), await content("b"), await content("a")] == [
        "first",
        "first",
        "second",
    ]
    response = await client.post(PATH.replace("r1", "a"), json=BODY)
    assert response.status_code == 502
    assert "ran out of replies" in response.json()["detail"]
    server.release("a")
    assert await content("a") == "first"


async def test_a_blocking_plain_def_policy_does_not_block_other_rollouts(
    serve: Callable[..., PolicyServer],
) -> None:
    gate = threading.Event()

    def policy(request: ChatRequest) -> str:
        if request.rollout_id == "slow":
            assert gate.wait(10), "the fast call never completed while this one blocked"
        return request.rollout_id

    server = serve(policy)
    headers = {"Authorization": f"Bearer {server.api_key}"}
    async with httpx.AsyncClient(base_url=server.base_url, headers=headers, timeout=15) as client:
        slow = asyncio.create_task(client.post("/v1/rollouts/slow/chat/completions", json=BODY))
        fast = await client.post("/v1/rollouts/fast/chat/completions", json=BODY)
        assert fast.json()["choices"][0]["message"]["content"] == "fast"
        assert not slow.done()
        gate.set()
        assert (await slow).json()["choices"][0]["message"]["content"] == "slow"


def test_servers_start_from_sync_code_side_by_side_and_stop_cleanly() -> None:
    with PolicyServer("one") as first, PolicyServer("two") as second:
        assert first.base_url != second.base_url
        for server, expected in ((first, "one"), (second, "two")):
            response = httpx.post(
                server.rollout_url("r1") + "/chat/completions",
                json=BODY,
                headers={"Authorization": f"Bearer {server.api_key}"},
                timeout=10,
            )
            assert response.json()["choices"][0]["message"]["content"] == expected
        base = first.base_url
    with pytest.raises(httpx.ConnectError):
        httpx.get(base + "/health", timeout=2)
    with pytest.raises(RuntimeError, match="not started"):
        _ = first.base_url


async def test_server_starts_inside_a_running_event_loop() -> None:
    async with PolicyServer("from a loop") as server:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.post(
                server.rollout_url("r1") + "/chat/completions",
                json=BODY,
                headers={"Authorization": f"Bearer {server.api_key}"},
            )
        assert response.json()["choices"][0]["message"]["content"] == "from a loop"
    # Synchronous start() works from inside the loop too.
    server = PolicyServer("sync start").start()
    try:
        assert (await asyncio.to_thread(httpx.get, server.base_url + "/health")).status_code == 200
    finally:
        server.stop()


def test_rollout_url_quotes_the_id() -> None:
    with PolicyServer("x") as server:
        assert server.rollout_url("a b/c") == f"{server.base_url}/v1/rollouts/a%20b%2Fc"


def test_a_served_endpoint_logs_no_access_lines_and_adds_no_silent_logger(
    serve: Callable[..., PolicyServer],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Access lines are dropped by level, not by a logger that stops propagating: pytest
    hangs its capture handlers on every non-propagating logger in every phase of every test."""
    access = logging.getLogger("uvicorn.access")
    # Other servers in this process (uvicorn's default logging config) may have turned it off.
    monkeypatch.setattr(access, "propagate", True)
    server = serve("hi")
    with caplog.at_level(logging.DEBUG):
        response = httpx.post(
            f"{server.rollout_url('r1')}/chat/completions",
            json=BODY,
            headers={"Authorization": f"Bearer {server.api_key}"},
            timeout=10,
        )
    assert response.status_code == 200
    assert access.propagate
    assert [r for r in caplog.records if r.name.startswith("uvicorn")] == []


async def test_a_scoped_endpoint_answers_each_rollout_only_with_the_key_bound_to_it(
    in_process: Callable[[PolicyServer], httpx.AsyncClient],
) -> None:
    server = PolicyServer("hi", scoped_keys=True)
    client = in_process(server)
    key_a, key_b = server.bind("ra"), server.bind("rb")
    assert key_a != key_b and key_a.startswith(server.api_key + ".")

    def post(rollout_id: str, key: str) -> Any:
        return client.post(
            f"/v1/rollouts/{rollout_id}/chat/completions",
            json=BODY,
            headers={"Authorization": f"Bearer {key}"},
        )

    assert (await post("ra", key_a)).status_code == 200
    assert (await post("rb", key_b)).status_code == 200
    foreign = await post("rb", key_a)
    assert foreign.status_code == 401
    assert foreign.json()["error"]["message"] == "Unauthorized: not this rollout's key"
    assert (await post("ra", server.api_key)).status_code == 401  # the bare server key
    assert (await post("ra", "garbage-key-0123456789")).status_code == 401
    unbound = await post("never-bound", key_a)
    assert unbound.status_code == 404
    assert (
        unbound.json()["error"]["message"] == "rollout 'never-bound' is not bound to this endpoint"
    )
    assert (await post("never-bound", "garbage-key-0123456789")).status_code == 401
    assert server.log("ra").n_calls == 1 and server.log("rb").n_calls == 1
    server.release("ra")
    assert (await post("ra", key_a)).status_code == 401  # released: the key is revoked
    key_b2 = server.bind("rb")  # bound again: a new key, the old one revoked
    assert (await post("rb", key_b)).status_code == 401
    assert (await post("rb", key_b2)).status_code == 200


async def test_an_unscoped_endpoint_takes_its_key_for_any_id_and_a_bound_key_for_its_own(
    in_process: Callable[[PolicyServer], httpx.AsyncClient],
) -> None:
    server = PolicyServer("hi")
    client = in_process(server)
    key = server.bind("ra")

    async def status(rollout_id: str, bearer: str) -> int:
        response = await client.post(
            f"/v1/rollouts/{rollout_id}/chat/completions",
            json=BODY,
            headers={"Authorization": f"Bearer {bearer}"},
        )
        return response.status_code

    assert await status("anything", server.api_key) == 200
    assert await status("ra", server.api_key) == 200
    assert await status("ra", key) == 200
    assert await status("rb", key) == 401
