"""The rollout endpoint client sends what LiteLLM sends, byte for byte, and yields the same items.

A raw ASGI chat endpoint on loopback records every request (path, headers and body bytes). The same
OpenAI Agents multiply rollout runs once through LiteLLM (the SDK's ``LitellmModel`` request
path) and once through our model (the lean endpoint client); requests and session items
must be identical, streamed (one chunk and 64 chunks per reply) and plain, non-ASCII text
included. A setting the lean client does not cover goes through LiteLLM unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, ModelSettings, Runner, function_tool
from agents.extensions.models.litellm_model import LitellmModel
from integrations.support import serve_rollout_app
from strands import tool as strands_tool

from osmosis_rollout.context import RolloutContext
from osmosis_rollout.integrations._endpoint import LeanLitellm
from osmosis_rollout.integrations.agents.openai_agents import (
    OsmosisLitellmModel,
    OsmosisMemorySession,
)


class RecordingModel:
    def __init__(self, chunks: int = 1) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.clients: list[tuple[str, int]] = []  # (host, port) of each request's connection
        self.chunks = chunks

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        if any(m.get("role") == "tool" for m in body.get("messages", [])):
            return {"role": "assistant", "content": "The product is 42."}, "stop"
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_mul_1",
                    "type": "function",
                    "function": {"name": "multiply", "arguments": '{"a": 6, "b": 7}'},
                }
            ],
        }, "tool_calls"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                while True:
                    m = await receive()
                    if m["type"] == "lifespan.startup":
                        await send({"type": "lifespan.startup.complete"})
                    else:
                        await send({"type": "lifespan.shutdown.complete"})
                        return
            return
        raw = b""
        while True:
            m = await receive()
            raw += m.get("body", b"")
            if not m.get("more_body"):
                break
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        self.requests.append((scope["path"], headers, raw))
        self.clients.append(tuple(scope["client"]))
        body = json.loads(raw)
        message, finish = self.reply(body)
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        base = {"id": "chatcmpl-1", "created": 1, "model": "osmosis-rollout"}
        if not body.get("stream"):
            out = json.dumps(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": out})
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"text/event-stream")],
            }
        )
        events = []
        delta: dict[str, Any] = {"role": "assistant"}
        if message.get("tool_calls"):
            delta["tool_calls"] = [{"index": 0, **message["tool_calls"][0]}]
            events.append(delta)
        else:
            text = message["content"]
            n = max(1, self.chunks)
            step = max(1, -(-len(text) // n))
            pieces = [text[i : i + step] for i in range(0, len(text), step)] if n > 1 else [text]
            while len(pieces) < n:
                pieces.append("")
            events.append({**delta, "content": pieces[0]})
            events += [{"content": p} for p in pieces[1:]]
        data = b""
        for d in events:
            ch = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": d, "finish_reason": None}],
            }
            data += b"data: " + json.dumps(ch).encode() + b"\n\n"
        last = {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
            "usage": usage,
        }
        data += b"data: " + json.dumps(last).encode() + b"\n\ndata: [DONE]\n\n"
        await send({"type": "http.response.body", "body": data})


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


class LitellmRoutedModel(OsmosisLitellmModel):  # type: ignore[misc]
    """Our model with the SDK's own LiteLLM request path (the reference)."""

    _fetch_response = LitellmModel._fetch_response


async def run_once(
    model_class: type[Any],
    *,
    stream: bool,
    chunks: int,
    prompt: str,
    app: RecordingModel | None = None,
    **settings: Any,
) -> tuple[list[tuple[str, dict[str, str], bytes]], list[Any]]:
    app = app or RecordingModel(chunks=chunks)
    async with serve_rollout_app(app) as url:
        ctx = RolloutContext(
            chat_completions_url=url + "/v1/chat/completions", api_key="k", rollout_id="r1"
        )
        with ctx:
            session = OsmosisMemorySession()
            agent = Agent(
                name="a",
                instructions="Use the multiply tool.",
                model=model_class(streaming=stream),
                model_settings=ModelSettings(temperature=1.0, max_tokens=4096, **settings),
                tools=[multiply],
            )
            await Runner.run(agent, [{"role": "user", "content": prompt}], session=session)
    return [(path, _without_host(headers), body) for path, headers, body in app.requests], list(
        session.items
    )


def _without_host(headers: dict[str, str]) -> dict[str, str]:
    """A request's headers minus ``host`` (each run serves on its own port)."""
    return {name: value for name, value in headers.items() if name != "host"}


@pytest.mark.parametrize(
    ("stream", "chunks"), [(True, 1), (True, 64), (False, 1)], ids=["sse-1", "sse-64", "plain"]
)
@pytest.mark.parametrize("prompt", ["What is 6 times 7?", "Combien font 6 fois 7 ? «ça» 日本"])
async def test_the_lean_client_sends_litellms_bytes_and_yields_its_items(
    stream: bool, chunks: int, prompt: str
) -> None:
    reference = await run_once(LitellmRoutedModel, stream=stream, chunks=chunks, prompt=prompt)
    lean = await run_once(OsmosisLitellmModel, stream=stream, chunks=chunks, prompt=prompt)
    assert len(reference[0]) == 2
    assert lean[0] == reference[0]
    assert lean[1] == reference[1]
    assert b'"stream":true' in lean[0][0][2] if stream else b'"stream"' not in lean[0][0][2]


async def test_a_setting_outside_the_lean_set_goes_through_litellm_unchanged() -> None:
    reference = await run_once(
        LitellmRoutedModel, stream=True, chunks=1, prompt="What is 6 times 7?", top_p=0.5
    )
    lean = await run_once(
        OsmosisLitellmModel, stream=True, chunks=1, prompt="What is 6 times 7?", top_p=0.5
    )
    assert b'"top_p":0.5' in reference[0][0][2]
    assert lean == reference


def _log_call(*_: Any, **__: Any) -> None:
    """A user's LiteLLM success callback (a plain function, as LiteLLM accepts)."""


@pytest.mark.parametrize(
    ("switch", "litellm_global", "through_litellm"),
    [
        ("", None, False),
        ("1", None, True),
        ("", ("num_retries", 2), True),
        ("", ("success_callback", [_log_call]), True),
    ],
    ids=["shortcuts-on", "shortcuts-off", "global-num-retries", "global-callback"],
)
async def test_calls_go_through_litellm_when_switched_off_or_when_its_globals_are_set(
    switch: str,
    litellm_global: tuple[str, Any] | None,
    through_litellm: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import litellm

    monkeypatch.setenv("OSMOSIS_NO_SHORTCUTS", switch)
    if litellm_global is not None:
        monkeypatch.setattr(litellm, *litellm_global)
    calls = []
    real = litellm.acompletion

    async def counted(**kwargs: Any) -> Any:
        calls.append(kwargs["model"])
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", counted)
    app = RecordingModel()
    await run_once(OsmosisLitellmModel, stream=False, chunks=1, prompt="6 times 7?", app=app)
    assert len(app.requests) == 2
    assert len(calls) == (2 if through_litellm else 0)


def test_only_rollout_model_calls_take_the_lean_path() -> None:
    import litellm

    lean = LeanLitellm(litellm)
    call = {
        "model": "litellm_proxy/osmosis-rollout",
        "messages": [{"role": "user", "content": "hi", "name": None}],
        "base_url": "http://127.0.0.1:1/v1",
        "api_key": "k",
        "temperature": 0.0,
        "tools": None,
        "stream": False,
    }
    assert lean.lean_body(call) == {
        "model": "osmosis-rollout",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.0,
    }
    assert lean.lean_body({**call, "model": "openai/gpt-4o"}) is None
    assert lean.lean_body({**call, "tool_choice": "auto"}) is None
    assert lean.lean_body({**call, "api_key": None}) is None
    assert lean.lean_body({**call, "base_url": "http://127.0.0.1:1/v1?x=1"}) is None


@strands_tool(name="multiply")
def strands_multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _without_timings(messages: list[Any]) -> list[Any]:
    """Strands messages minus what differs run to run (tracking ids, latency metrics)."""
    kept = []
    for message in messages:
        message = {k: v for k, v in message.items() if k != "tracking_id"}
        if isinstance(message.get("metadata"), dict):
            message["metadata"] = {k: v for k, v in message["metadata"].items() if k != "metrics"}
        kept.append(message)
    return kept


async def run_strands_once(
    *, lean: bool, stream: bool, chunks: int, prompt: str, app: RecordingModel | None = None
) -> tuple[list[tuple[str, dict[str, str], bytes]], list[Any]]:
    from strands import Agent as StrandsAgent
    from strands.models.litellm import LiteLLMModel

    from osmosis_rollout.integrations._litellm import ROLLOUT_MODEL_ID, skip_mcp_handler_args
    from osmosis_rollout.integrations.agents.strands import (
        OsmosisRolloutModel as StrandsRolloutModel,
    )
    from osmosis_rollout.integrations.agents.strands import (
        OsmosisStrandsAgent,
    )

    app = app or RecordingModel(chunks=chunks)
    params = {"temperature": 0, "max_tokens": 256}
    async with serve_rollout_app(app) as url:
        ctx = RolloutContext(
            chat_completions_url=url + "/v1/chat/completions", api_key="k", rollout_id="r1"
        )
        with ctx:
            agent: Any
            if lean:
                agent = OsmosisStrandsAgent(
                    model=StrandsRolloutModel(params=params, streaming=stream),
                    tools=[strands_multiply],
                    system_prompt="Use the multiply tool.",
                    callback_handler=None,
                )
            else:
                client_args = {
                    **skip_mcp_handler_args(),
                    "api_base": ctx.chat_completions_url,
                    "api_key": ctx.api_key,
                }
                model = LiteLLMModel(
                    client_args=client_args, model_id=ROLLOUT_MODEL_ID, params=params, stream=stream
                )
                agent = StrandsAgent(
                    model=model,
                    tools=[strands_multiply],
                    system_prompt="Use the multiply tool.",
                    callback_handler=None,
                )
            await agent.invoke_async(prompt)
    requests = [(path, _without_host(headers), body) for path, headers, body in app.requests]
    return requests, _without_timings(list(agent.messages))


@pytest.mark.parametrize(
    ("stream", "chunks"), [(True, 1), (True, 64), (False, 1)], ids=["sse-1", "sse-64", "plain"]
)
@pytest.mark.parametrize("prompt", ["What is 6 times 7?", "Combien font 6 fois 7 ? «ça» 日本"])
async def test_strands_through_the_lean_client_matches_litellm(
    stream: bool, chunks: int, prompt: str
) -> None:
    reference = await run_strands_once(lean=False, stream=stream, chunks=chunks, prompt=prompt)
    lean = await run_strands_once(lean=True, stream=stream, chunks=chunks, prompt=prompt)
    assert len(reference[0]) == 2
    assert lean == reference


@pytest.mark.parametrize("chunks", [1, 64])
@pytest.mark.parametrize("framework", ["openai", "strands"])
async def test_streamed_calls_of_a_rollout_reuse_one_pooled_connection(
    framework: str, chunks: int
) -> None:
    # A stream closed before its end (after ``[DONE]``, before the chunked body's last
    # chunk) cannot go back to the pool: every model call would open a new connection.
    app = RecordingModel(chunks=chunks)
    prompt = "What is 6 times 7?"
    if framework == "openai":
        await run_once(OsmosisLitellmModel, stream=True, chunks=chunks, prompt=prompt, app=app)
    else:
        await run_strands_once(lean=True, stream=True, chunks=chunks, prompt=prompt, app=app)
    assert len(app.clients) == 2
    assert app.clients[0] == app.clients[1], f"each call opened its own connection: {app.clients}"
