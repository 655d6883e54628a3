"""A rollout-bound chat client for workflows that use no agent framework.

:class:`RolloutChatClient` calls the active rollout's chat-completions endpoint over httpx
(streaming or not) and records the conversation; it registers itself as the rollout's one
sample source, so ``run()`` can simply return ``None``::

    class Workflow(AgentWorkflow):
        async def run(self, ctx: AgentWorkflowContext) -> None:
            chat = RolloutChatClient(ctx.prompt, tools=TOOLS, temperature=1.0)
            while True:
                reply = await chat.complete()
                if not reply.tool_calls:
                    break
                for call in reply.tool_calls:
                    args = json.loads(call["function"]["arguments"])
                    chat.add_tool_result(call["id"], multiply(**args))

The sample's ``messages`` are the conversation exactly as sent and received (chat format);
its ``trajectory_messages`` are the same with each assistant message's ``usage`` inlined,
so the ATIF trajectory carries per-step token counts.

Streaming follows :mod:`osmosis_rollout.integrations.streaming` (default on; the
production endpoint is streaming-only); a streamed reply is assembled from its chunks,
tool-call argument deltas included, into the same message a plain reply gives.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
import importlib
import json
import ssl
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from osmosis_rollout.context import RolloutContext, SampleSource, get_rollout_context
from osmosis_rollout.errors import PolicyError
from osmosis_rollout.integrations.streaming import resolve_streaming
from osmosis_rollout.transport.chunks import StreamFold
from osmosis_rollout.transport.connection_pools import LOOP_CONNECTIONS, keepalive_transport
from osmosis_rollout.transport.telemetry import model_call
from osmosis_rollout.types import RolloutSample

ROLLOUT_MODEL = "osmosis-rollout"
"""The model name every rollout sends; the endpoint decides which model answers."""

DEFAULT_TIMEOUT = httpx.Timeout(600.0, connect=10.0)


_shared_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The default TLS context (CA bundle loaded), built once per process.

    Loading the CA bundle takes tens of milliseconds; without this every event loop's
    first rollout paid it. Call it before the first rollout to take that off the clock.
    """
    return httpx.create_ssl_context()


_FIRST_REQUEST_MODULES = ("httpcore", "h11", "anyio._backends._asyncio", "anyio.streams.tls")


def warm_up() -> None:
    """Do what the first rollout's first request would do once: load the CA bundle and
    import httpx's transport modules (~100 modules, imported lazily by the first request).

    Whoever owns the process (the pytest plugin, ``osmosis-rollout serve``) calls it before
    the first rollout, so the first result is not late by that.
    """
    tls_context()
    for name in _FIRST_REQUEST_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def _shared_client() -> httpx.AsyncClient:
    """One pooled client per event loop, reused by every rollout on that loop."""
    loop = asyncio.get_running_loop()
    client = _shared_clients.get(loop)
    if client is None or client.is_closed:
        # Bounded pools: one pool's scans of every connection grow with the calls in flight.
        transport = keepalive_transport(httpx, LOOP_CONNECTIONS, tls_context())
        client = httpx.AsyncClient(timeout=DEFAULT_TIMEOUT, transport=transport)
        _shared_clients[loop] = client
    return client


@dataclass
class ChatCompletion:
    """One assistant reply: the message appended to the conversation, and its metadata."""

    message: dict[str, Any]
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def content(self) -> str | None:
        """The reply's text (``None`` for a tool-call-only reply)."""
        content = self.message.get("content")
        return content if isinstance(content, str) else None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The reply's tool calls in chat format (``arguments`` is a JSON string)."""
        return list(self.message.get("tool_calls") or [])


class RolloutChatClient(SampleSource):
    """Chat with the active rollout's endpoint and record the conversation as its sample.

    Constructed inside a rollout context (``RuntimeError`` otherwise), it registers itself
    as the rollout's sample source (a second source raises ``ValueError``). ``messages``
    start the conversation (usually ``ctx.prompt``); ``tools`` are OpenAI tool dicts sent
    with every call; extra keyword arguments (``temperature``, ``max_tokens``, ...) go into
    every request body. ``http_client`` defaults to a pooled client shared by the loop.
    """

    def __init__(
        self,
        messages: Sequence[Mapping[str, Any]] | None = None,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        streaming: bool | None = None,
        http_client: httpx.AsyncClient | None = None,
        model: str = ROLLOUT_MODEL,
        **params: Any,
    ) -> None:
        ctx = get_rollout_context()
        if ctx is None:
            raise RuntimeError(
                "RolloutChatClient needs an active RolloutContext: construct it inside "
                "AgentWorkflow.run(), where the backend has entered the rollout's context"
            )
        if not ctx.chat_completions_url:
            raise RuntimeError(
                f"rollout {ctx.rollout_id!r} has no chat_completions_url to call (set it on "
                "the RolloutContext or in OSMOSIS_CHAT_COMPLETIONS_URL)"
            )
        self._ctx: RolloutContext = ctx
        self._messages: list[dict[str, Any]] = [copy.deepcopy(dict(m)) for m in messages or ()]
        self._usage: dict[int, dict[str, Any]] = {}
        self.tools: list[dict[str, Any]] = [dict(tool) for tool in tools or ()]
        self.params: dict[str, Any] = params
        self.model = model
        self.streaming: bool = resolve_streaming(streaming, ctx)
        self._http_client = http_client
        self.url = ctx.chat_completions_url.rstrip("/") + "/chat/completions"
        ctx.set_sample_source(self)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """A copy of the conversation so far."""
        return copy.deepcopy(self._messages)

    def add_message(self, message: Mapping[str, Any]) -> None:
        """Append any chat message (``{"role": ..., "content": ...}``)."""
        if "role" not in message:
            raise ValueError(f"a chat message needs a 'role': {dict(message)!r}")
        self._messages.append(copy.deepcopy(dict(message)))

    def add_user_message(self, content: str) -> None:
        """Append a user message."""
        self._messages.append({"role": "user", "content": content})

    def add_tool_result(self, tool_call_id: str, content: Any) -> None:
        """Append a tool result for ``tool_call_id``; non-strings are JSON-encoded."""
        text = content if isinstance(content, str) else json.dumps(content, default=str)
        self._messages.append({"role": "tool", "tool_call_id": tool_call_id, "content": text})

    async def complete(
        self,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        streaming: bool | None = None,
        **params: Any,
    ) -> ChatCompletion:
        """Send the conversation, append the assistant reply, and return it.

        ``tools``/``params`` override the client's for this call; ``streaming`` overrides
        its streaming choice. Raises :class:`~osmosis_rollout.errors.PolicyError` when the
        endpoint answers an error or a reply without choices.
        """
        stream = self.streaming if streaming is None else streaming
        body: dict[str, Any] = {"model": self.model, "messages": self._messages}
        call_tools = self.tools if tools is None else [dict(tool) for tool in tools]
        if call_tools:
            body["tools"] = call_tools
        body.update(self.params)
        body.update(params)
        body["stream"] = stream
        if stream:
            body.setdefault("stream_options", {"include_usage": True})
        headers = {"Authorization": f"Bearer {self._ctx.api_key}"} if self._ctx.api_key else {}
        client = self._http_client or _shared_client()
        with model_call(self.url, stream=stream):
            if stream:
                async with client.stream("POST", self.url, json=body, headers=headers) as response:
                    await self._raise_for_status(response)
                    reply = await _assemble_stream(response.aiter_lines(), self.url)
            else:
                response = await client.post(self.url, json=body, headers=headers)
                await self._raise_for_status(response)
                reply = _parse_completion(response, self.url)
        self._messages.append(reply.message)
        if reply.usage is not None:
            self._usage[len(self._messages) - 1] = reply.usage
        return ChatCompletion(
            message=copy.deepcopy(reply.message),
            finish_reason=reply.finish_reason,
            usage=reply.usage,
            raw=reply.raw,
        )

    async def _raise_for_status(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        detail = (await response.aread()).decode("utf-8", "replace")[:1000]
        raise PolicyError(
            f"chat completions endpoint {self.url} answered HTTP {response.status_code} "
            f"for rollout {self._ctx.rollout_id!r}: {detail}"
        )

    def _trajectory(self) -> list[dict[str, Any]]:
        messages = copy.deepcopy(self._messages)
        for index, usage in self._usage.items():
            messages[index]["usage"] = copy.deepcopy(usage)
        return messages

    async def get_sample(self) -> RolloutSample:
        """The conversation as ``messages``; with per-reply usage as trajectory."""
        return RolloutSample(messages=self.messages, trajectory_messages=self._trajectory())

    async def get_preview(self, max_messages: int) -> RolloutSample | None:
        """An isolated copy of the last ``max_messages`` messages (for live previews)."""
        if max_messages <= 0:
            return None
        recent = self._trajectory()[-max_messages:]
        return RolloutSample(
            messages=[{k: v for k, v in m.items() if k != "usage"} for m in recent],
            trajectory_messages=recent,
            extra_fields={
                "_preview_truncated": len(self._messages) > max_messages,
                "_preview_turn": sum(m.get("role") == "assistant" for m in self._messages),
            },
        )


def _parse_completion(response: httpx.Response, url: str) -> ChatCompletion:
    try:
        payload = response.json()
        choice = payload["choices"][0]
        message = dict(choice["message"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise PolicyError(
            f"chat completions endpoint {url} answered without a usable choice: "
            f"{response.text[:500]!r}"
        ) from exc
    return ChatCompletion(
        message=_clean_message(message),
        finish_reason=choice.get("finish_reason"),
        usage=payload.get("usage"),
        raw=payload,
    )


def _clean_message(message: dict[str, Any]) -> dict[str, Any]:
    """The assistant message as it goes back to the endpoint: no nulls besides content."""
    cleaned: dict[str, Any] = {"role": message.get("role") or "assistant"}
    cleaned["content"] = message.get("content")
    for key, value in message.items():
        if key not in cleaned and value not in (None, [], ""):
            cleaned[key] = value
    return cleaned


async def sse_chunks(lines: AsyncIterator[str], url: str) -> AsyncIterator[dict[str, Any]]:
    """The JSON payloads of a chat-completions SSE stream, up to ``[DONE]``.

    Comments and non-data fields are skipped; bad JSON or an error event raises
    :class:`PolicyError` naming ``url``. What follows ``[DONE]`` is read and dropped: a
    response closed before its body's end cannot go back to the connection pool, so every
    call would open a new connection.
    """
    event = "message"
    async for line in lines:
        if not line:
            event = "message"
            continue
        if line.startswith(":"):
            continue
        if line.startswith("event:"):
            event = line[len("event:") :].strip()
            continue
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            async for _ in lines:
                pass
            return
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise PolicyError(
                f"chat completions stream from {url} sent bad JSON: {data[:200]!r}"
            ) from exc
        if event == "error" or "error" in chunk:
            raise PolicyError(
                f"chat completions stream from {url} failed: {chunk.get('error', chunk)}"
            )
        yield chunk


async def _assemble_stream(lines: AsyncIterator[str], url: str) -> ChatCompletion:
    """Fold ``chat.completion.chunk`` SSE events into one reply (tool-call deltas too)."""
    fold = StreamFold()
    async for chunk in sse_chunks(lines, url):
        fold.add(chunk)
    if not fold.saw_choice:
        raise PolicyError(f"chat completions stream from {url} ended without any choice")
    message: dict[str, Any] = {"role": fold.role, "content": fold.text()}
    if fold.reasoning:
        message["reasoning_content"] = "".join(fold.reasoning)
    if fold.calls:
        message["tool_calls"] = [
            {**call, "id": call["id"] or f"call_{index}"}
            for index, call in sorted(fold.calls.items())
        ]
    return ChatCompletion(message=message, finish_reason=fold.finish_reason, usage=fold.usage)


__all__ = ["ROLLOUT_MODEL", "ChatCompletion", "RolloutChatClient", "tls_context", "warm_up"]
