"""Helpers shared by the integration tests (imported as ``integrations.support``)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from osmosis_rollout.context import RolloutContext
from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.policy import ChatReply, ChatRequest, Text, ToolCall


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def multiply_policy(*, wrong: bool = False) -> Callable[[ChatRequest], Any]:
    """A model that multiplies: call the tool with the prompt's two numbers, then report it.

    With ``wrong``, the final answer is off by one (so a grader must give 0.0).
    """

    def policy(request: ChatRequest) -> Any:
        tool_results = [m for m in request.messages if m.get("role") == "tool"]
        if not tool_results:
            prompt = request.last_user_message or ""
            a, b = (int(n) for n in re.findall(r"-?\d+", prompt)[:2])
            return ToolCall("multiply", {"a": a, "b": b}, id="call_mul_1")
        product = int(re.findall(r"-?\d+", _text_of(tool_results[-1].get("content")))[0])
        return Text(f"The product is {product - 1 if wrong else product}.")

    return policy


def unknown_tool_policy(request: ChatRequest) -> Any:
    """A model that calls a tool the agent does not have."""
    return ToolCall("divide", {"a": 1, "b": 2}, id="call_div_1")


def truncated_policy(request: ChatRequest) -> Any:
    """A model whose reply was cut at max_tokens."""
    return ChatReply(content="The product is", tool_calls=[], finish_reason="length")


def rollout_context(
    server: PolicyServer, rollout_id: str = "r1", *, streaming: bool | None = None
) -> RolloutContext:
    """A RolloutContext bound to ``server`` (with the optional streaming hint)."""
    ctx = RolloutContext(
        chat_completions_url=server.rollout_url(rollout_id),
        api_key=server.api_key,
        rollout_id=rollout_id,
    )
    if streaming is not None:
        ctx.streaming = streaming  # type: ignore[attr-defined]
    return ctx


def streamed_calls(server: PolicyServer, rollout_id: str = "r1") -> list[bool]:
    """For each call the server got for ``rollout_id``: did it ask to stream?"""
    return [bool(record.request.get("stream")) for record in server.log(rollout_id).calls]


@asynccontextmanager
async def serve_rollout_app(app: Any) -> AsyncIterator[str]:
    """Serve a rollout-server app with uvicorn on 127.0.0.1 (this loop); yield its URL."""
    import uvicorn

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(10):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("rollout server exited during startup")
                await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        try:
            async with asyncio.timeout(10):
                await task
        except TimeoutError:
            server.force_exit = True
            task.cancel()


def load_json(path: Any) -> Any:
    """Parse a JSON file."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
