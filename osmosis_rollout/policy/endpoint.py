"""The policy endpoint: an OpenAI chat-completions server in front of any :class:`Policy`.

``POST <base>/v1/rollouts/{rollout_id}/chat/completions`` with ``Authorization: Bearer <key>``
(the keys: :class:`PolicyServer`). A rollout is handed ``rollout_url(rollout_id)`` as its
``chat_completions_url``; its client appends ``/chat/completions``. Replies are plain
``chat.completion`` objects, or, with ``"stream": true``, server-sent events shaped like a
real provider's: a role chunk, content split over several deltas, tool calls with
``index``/``id``/``name`` first and incremental ``arguments``, a ``finish_reason`` chunk, a
usage chunk when ``stream_options.include_usage`` is set, ``[DONE]``.

:class:`PolicyServer` runs the app under uvicorn on 127.0.0.1 in a daemon thread with its own
event loop, so it works from sync code, from inside a running loop, and several at once; its
``app`` also serves in-process through ``httpx.ASGITransport``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import logging
import math
import re
import secrets
import socket
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote

from osmosis_rollout._internal.ids import is_single_path_segment
from osmosis_rollout._internal.imports import require_extra
from osmosis_rollout._internal.user_frames import user_traceback
from osmosis_rollout.policy.accounting import CallRecord, RolloutCallLog
from osmosis_rollout.policy.faults import Faults
from osmosis_rollout.policy.recording import known_secrets
from osmosis_rollout.policy.scripted import as_policy
from osmosis_rollout.policy.types import ChatReply, ChatRequest, coerce_reply, estimate_usage

require_extra("fastapi", extra="server")
require_extra("uvicorn", extra="server")

import uvicorn  # noqa: E402
from fastapi import APIRouter, FastAPI, Request, Response  # noqa: E402
from fastapi.responses import StreamingResponse  # noqa: E402

__all__ = [
    "CallRecord",
    "Faults",
    "PolicyServer",
    "RolloutCallLog",
    "create_policy_router",
]

logger = logging.getLogger(__name__)

#: Request fields that are not sampling parameters (``tools`` travels as ChatRequest.tools).
NON_PARAM_FIELDS = frozenset({"model", "messages", "stream", "stream_options", "n", "tools"})
_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
_WORDS = re.compile(r"\s*\S+\s*|\s+")
_MAX_CONTENT_PIECES = 16
_MAX_ARGUMENT_PIECES = 4
_START_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 5.0
_GRACEFUL_SHUTDOWN_S = 2.0
_POLICY_THREADS = 64


class _StreamCut(Exception):
    """Raised inside a stream to drop the connection mid-body (the ``cut_stream`` fault)."""


class _DropInjectedCuts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _StreamCut)


logging.getLogger("uvicorn.error").addFilter(_DropInjectedCuts())


@dataclass(frozen=True)
class _Binding:
    row: dict[str, Any] | None
    row_key: str | None
    attempt: int
    key: str
    """The rollout's own bearer key."""


def _json(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _failure_text(exc: BaseException) -> str:
    """``Type: message`` of a failed model call, naming the URL it called when the message
    does not (``APIConnectionError: Connection error.`` alone leaves a person guessing which
    server is down)."""
    text = f"{type(exc).__name__}: {exc}"
    url = _called_url(exc)
    if url and url not in text:
        text += f" (calling {url})"
    return text


def _called_url(exc: BaseException) -> str | None:
    """The URL of the HTTP request behind ``exc`` or an exception it was raised from."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        try:
            request = getattr(current, "request", None)
            url = getattr(request, "url", None)
        except Exception:  # httpx raises RuntimeError for an error without a request
            url = None
        if url is not None:
            return str(url)
        current = current.__cause__ or current.__context__
    return None


def _error_payload(status: int, message: str, error_type: str, param: str | None = None) -> bytes:
    error: dict[str, Any] = {"message": message, "type": error_type, "code": status}
    if param is not None:
        error["param"] = param
    return _json({"error": error, "detail": message}).encode()


def _error_response(
    status: int,
    message: str,
    error_type: str,
    *,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    return Response(
        _error_payload(status, message, error_type, param),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def _validate(body: dict[str, Any]) -> tuple[str, str] | None:
    """The first problem with a chat-completions body as (message, param), or None."""
    if "messages" not in body:
        return "'messages' is required: a list of chat messages", "messages"
    messages = body["messages"]
    if not isinstance(messages, list):
        return f"'messages' must be a list, got {type(messages).__name__}", "messages"
    if not messages:
        return "'messages' must hold at least one message", "messages"
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages[{i}] must be an object, got {type(message).__name__}", "messages"
        role = message.get("role")
        if role not in _ROLES:
            return (
                f"messages[{i}].role must be one of {', '.join(sorted(_ROLES))}; got {role!r}",
                "messages",
            )
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            return f"'tools' must be a list, got {type(tools).__name__}", "tools"
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                return f"tools[{i}] must be an object", "tools"
            if tool.get("type", "function") == "function":
                function = tool.get("function")
                if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                    return f"tools[{i}].function.name is required", "tools"
    n = body.get("n")
    if n is not None and n != 1:
        return f"'n' must be 1 (the endpoint answers one choice per call); got {n!r}", "n"
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        return f"'stream' must be a boolean, got {stream!r}", "stream"
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        return "'stream_options' must be an object", "stream_options"
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        return f"'model' must be a string, got {type(model).__name__}", "model"
    return None


def _parsed_body(raw: bytes) -> dict[str, Any] | Response:
    """The request's JSON object, or the 400 that refuses it."""
    try:
        body = json.loads(raw)
    except ValueError:
        return _error_response(400, "request body is not valid JSON", "invalid_request_error")
    if not isinstance(body, dict):
        return _error_response(
            400,
            f"request body must be a JSON object, got {type(body).__name__}",
            "invalid_request_error",
        )
    problem = _validate(body)
    if problem is not None:
        return _error_response(400, problem[0], "invalid_request_error", param=problem[1])
    return body


def _split_text(text: str) -> list[str]:
    """Split content into word-aligned deltas (at most ``_MAX_CONTENT_PIECES``)."""
    words = _WORDS.findall(text)
    if len(words) <= 1:
        if len(text) <= 4:
            return [text]
        half = len(text) // 2
        return [text[:half], text[half:]]
    per = math.ceil(len(words) / _MAX_CONTENT_PIECES)
    return ["".join(words[i : i + per]) for i in range(0, len(words), per)]


def _split_even(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, math.ceil(len(text) / pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _usage_dict(reply: ChatReply) -> dict[str, int] | None:
    if reply.usage is None:
        return None
    return {k: v for k, v in reply.usage.to_dict().items() if k != "estimated"}


def _envelope(kind: str, model: str) -> dict[str, Any]:
    """The fields every ``chat.completion`` (or ``.chunk``) opens with, a fresh id each reply."""
    return {
        "id": "chatcmpl-" + secrets.token_hex(12),
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }


def _completion_body(reply: ChatReply, model: str) -> dict[str, Any]:
    return {
        **_envelope("chat.completion", model),
        "choices": [
            {
                "index": 0,
                "message": reply.to_message(),
                "logprobs": None,
                "finish_reason": reply.finish_reason,
            }
        ],
        "usage": _usage_dict(reply),
    }


def _stream_events(reply: ChatReply, model: str, include_usage: bool) -> list[str]:
    """The SSE events of one streamed reply, ``[DONE]`` included."""
    base = _envelope("chat.completion.chunk", model)
    if include_usage:
        base["usage"] = None
    events: list[str] = []

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        events.append(f"data: {_json({**base, 'choices': [choice]})}\n\n")

    message = reply.to_message()
    calls: list[dict[str, Any]] = message.get("tool_calls", [])
    content = reply.content
    if content or not calls:
        chunk({"role": "assistant", "content": ""})
        for piece in _split_text(content or ""):
            chunk({"content": piece})
    for index, call in enumerate(calls):
        head: dict[str, Any] = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        if index == 0 and not content:
            chunk({"role": "assistant", "content": None, "tool_calls": [head]})
        else:
            chunk({"tool_calls": [head]})
        for piece in _split_even(call["function"]["arguments"], _MAX_ARGUMENT_PIECES):
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    chunk({}, reply.finish_reason)
    if include_usage:
        events.append(f"data: {_json({**base, 'choices': [], 'usage': _usage_dict(reply)})}\n\n")
    events.append("data: [DONE]\n\n")
    return events


class PolicyServer:
    """Serve ``policy`` as an OpenAI chat-completions endpoint scoped per rollout.

    ``policy`` goes through :func:`~osmosis_rollout.policy.as_policy`. ``api_key`` is the bearer
    every call must carry (generated when None). ``faults`` injects failures for tests and may be
    replaced at any time through the ``faults`` attribute.

    ``scoped_keys=True`` (what the pytest plugin and its fixtures use): a rollout's URL answers
    only the key :meth:`bind` issued to it (an unbound id gets 404, another rollout's key or
    the bare ``api_key`` 401), so one rollout cannot drive, read or spend another's
    conversation. Without it, ``api_key`` opens every rollout id (a fake provider, a quick
    test), and a bound rollout's own key opens its URL too. Usage::

        with PolicyServer(["hello"]) as server:
            url = server.rollout_url("r1")   # the rollout's chat_completions_url
            server.log("r1").total_tokens
    """

    def __init__(
        self,
        policy: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        faults: Faults | None = None,
        scoped_keys: bool = False,
    ) -> None:
        self.policy = as_policy(policy)
        self.scoped_keys = scoped_keys
        self.host = host
        self.port = port
        self.api_key: str = api_key or secrets.token_urlsafe(24)
        self.faults = faults
        self._logs: dict[str, RolloutCallLog] = {}
        self._bindings: dict[str, _Binding] = {}
        self._owners: dict[str, str] = {}
        """Each bound rollout's key -> its rollout id."""
        self._lock = threading.Lock()
        self._call_numbers = itertools.count(1)
        self._secrets = known_secrets()
        # The key and every rollout key derived from it, token included.
        self._own_keys = re.compile(re.escape(self.api_key) + r"(?:\.[A-Za-z0-9_\-]+)?")
        self._expected_auth = self.api_key.encode()
        self._base_url: str | None = None
        self._serving: _ServingThread | None = None
        self._stopping = threading.Event()
        self.app: FastAPI = FastAPI(
            title="osmosis policy endpoint", docs_url=None, redoc_url=None, openapi_url=None
        )
        self.app.include_router(create_policy_router(self))
        self.app.state.policy_server = self

    def __repr__(self) -> str:
        where = self._base_url or "not started"
        return f"PolicyServer({self.policy!r}, {where})"

    # -- addresses -----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` once started."""
        if self._base_url is None:
            raise RuntimeError("PolicyServer is not started; call start() or use it as a context")
        return self._base_url

    def rollout_url(self, rollout_id: str) -> str:
        """The ``chat_completions_url`` of ``rollout_id`` (clients append ``/chat/completions``)."""
        return f"{self.base_url}/v1/rollouts/{quote(rollout_id, safe='')}"

    # -- per-rollout state ---------------------------------------------------------

    def bind(
        self,
        rollout_id: str,
        *,
        row: dict[str, Any] | None = None,
        row_key: str | None = None,
        attempt: int = 0,
    ) -> str:
        """Attach the dataset row (and its cassette key and repeat index) to a rollout's calls.

        Returns the rollout's own key (``<api_key>.<token>``): hand it to the rollout as its
        ``llm_api_key``. Binding an id again issues a new key and revokes the old one.
        """
        key = f"{self.api_key}.{secrets.token_urlsafe(18)}"
        binding = _Binding(row=row, row_key=row_key, attempt=attempt, key=key)
        with self._lock:
            previous = self._bindings.get(rollout_id)
            if previous is not None:
                self._owners.pop(previous.key, None)
            self._bindings[rollout_id] = binding
            self._owners[key] = rollout_id
        return key

    def log(self, rollout_id: str) -> RolloutCallLog:
        """A snapshot of the calls ``rollout_id`` made so far (empty when it made none)."""
        with self._lock:
            found = self._logs.get(rollout_id)
            return found.copy() if found is not None else RolloutCallLog(rollout_id)

    def release(self, rollout_id: str) -> RolloutCallLog:
        """Forget ``rollout_id`` (log, binding, scripted position) and return its log."""
        with self._lock:
            found = self._logs.pop(rollout_id, None)
            binding = self._bindings.pop(rollout_id, None)
            if binding is not None:
                self._owners.pop(binding.key, None)
        forget = getattr(self.policy, "forget", None)
        if callable(forget):
            forget(rollout_id)
        return found if found is not None else RolloutCallLog(rollout_id)

    def _record(self, rollout_id: str, record: CallRecord) -> None:
        with self._lock:
            log = self._logs.get(rollout_id)
            if log is None:
                log = self._logs[rollout_id] = RolloutCallLog(rollout_id)
            log.add(record)

    # -- request handling ------------------------------------------------------------

    def _refusal(self, rollout_id: str, header: str | None) -> Response | None:
        """The 401 or 404 a call for ``rollout_id`` with ``header`` gets, or None to serve it."""
        scheme, _, token = (header or "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        owner = self._owners.get(token) if token else None
        binding = self._bindings.get(rollout_id)
        if not self.scoped_keys:
            shared = secrets.compare_digest(token.encode(), self._expected_auth)
            if shared or (binding is not None and owner == rollout_id):
                return None
            return _error_response(401, "Unauthorized", "authentication_error")
        if owner is None:
            return _error_response(401, "Unauthorized", "authentication_error")
        if binding is None:
            return _error_response(
                404, f"rollout {rollout_id!r} is not bound to this endpoint", "not_found_error"
            )
        if owner != rollout_id or not secrets.compare_digest(token.encode(), binding.key.encode()):
            return _error_response(
                401, "Unauthorized: not this rollout's key", "authentication_error"
            )
        return None

    def _redact(self, message: str) -> str:
        """``message`` on one line, bounded, with no key in it."""
        return " ".join(self._redact_lines(message).split())[:2000]

    def _redact_lines(self, text: str) -> str:
        """``text`` (its lines kept) with no key in it."""
        text = self._own_keys.sub("[REDACTED]", text)
        for secret in self._secrets:
            text = text.replace(secret, "[REDACTED]")
        return text

    def _chat_request(self, rollout_id: str, body: dict[str, Any]) -> ChatRequest:
        binding = self._bindings.get(rollout_id)
        return ChatRequest(
            messages=body["messages"],
            tools=body.get("tools") or [],
            params={k: v for k, v in body.items() if k not in NON_PARAM_FIELDS},
            rollout_id=rollout_id,
            row=binding.row if binding else None,
            row_key=binding.row_key if binding else None,
            attempt=binding.attempt if binding else 0,
            model=body.get("model"),
            stream=bool(body.get("stream")),
        )

    async def _answer(self, request: ChatRequest) -> ChatReply:
        reply = coerce_reply(await self.policy.complete(request))
        if reply.usage is None:
            reply = dataclasses.replace(reply, usage=estimate_usage(request, reply))
        return reply

    async def handle(self, rollout_id: str, request: Request) -> Response:
        """Serve one chat-completions call (the route's body; public for custom mounts)."""
        refusal = self._refusal(rollout_id, request.headers.get("authorization"))
        if refusal is not None:
            return refusal
        if not is_single_path_segment(rollout_id):
            return _error_response(
                422, f"invalid rollout_id {rollout_id!r}", "invalid_request_error"
            )
        body = _parsed_body(await request.body())
        if isinstance(body, Response):
            return body

        started = time.perf_counter()
        stream = bool(body.get("stream"))
        call_number = next(self._call_numbers)
        faults = self.faults
        if faults is not None:
            if call_number <= faults.fail_first:
                code, message, error_type, headers = faults.failure(call_number)
                record = CallRecord(body, None, 0.0, message, stream, status_code=code)
                self._record(rollout_id, record)
                return _error_response(code, message, error_type, headers=headers)
            if faults.latency_s > 0:
                await _sleep(faults.latency_s, self._stopping)
            if faults.hang_s > 0 and faults.applies_to(call_number):
                await _sleep(faults.hang_s, self._stopping)

        model = body.get("model") or "osmosis-rollout"
        chat_request = self._chat_request(rollout_id, body)
        try:
            reply = await self._answer(chat_request)
        except Exception as exc:
            message = self._redact(_failure_text(exc))
            seen = user_traceback(exc)
            traceback = self._redact_lines(seen.text)
            # A policy of the user's (a scripted one) that raised: its frames, for the log too.
            shown = f"\n{traceback}" if seen.where is not None else ""
            logger.warning("policy failed for rollout %s: %s%s", rollout_id, message, shown)
            status = getattr(exc, "status_code", None)
            status = status if isinstance(status, int) and 400 <= status < 500 else 502
            self._record(
                rollout_id,
                CallRecord(
                    body,
                    None,
                    time.perf_counter() - started,
                    message,
                    stream,
                    status_code=200 if stream else status,
                    where=seen.where,
                    traceback=traceback,
                ),
            )
            if stream:
                payload = _error_payload(status, message, "policy_error").decode()
                error_events = [f"event: error\ndata: {payload}\n\n", "data: [DONE]\n\n"]
                return _sse(error_events, None, call_number)
            return _error_response(status, message, "policy_error")

        self._record(
            rollout_id,
            CallRecord(
                body,
                reply.to_dict(),
                time.perf_counter() - started,
                None,
                stream,
                usage=reply.usage,
            ),
        )
        if not stream:
            return Response(
                _json(_completion_body(reply, model)).encode(), media_type="application/json"
            )
        options = body.get("stream_options") or {}
        events = _stream_events(reply, model, bool(options.get("include_usage")))
        return _sse(events, faults, call_number)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> PolicyServer:
        """Serve on ``host`` (a free port unless one was given); return once accepting connections."""
        if self._serving is None:
            self._stopping.clear()
            self._serving = _ServingThread(self.app, self.host, self.port)
            self._base_url = self._serving.base_url
        return self

    def stop(self) -> None:
        """Stop serving: in-flight calls get a short grace, hung ones are cut; bounded (~5 s)."""
        serving, self._serving = self._serving, None
        if serving is not None:
            self._stopping.set()
            serving.stop()
            self._base_url = None

    def __enter__(self) -> PolicyServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> PolicyServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)


async def _sleep(seconds: float, stopping: threading.Event) -> None:
    """Sleep, but wake early once ``stopping`` is set (hung calls must not pin stop())."""
    deadline = time.monotonic() + seconds
    while not stopping.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            return
        await asyncio.sleep(min(left, 0.05))


def _sse(events: list[str], faults: Faults | None, call_number: int) -> StreamingResponse:
    """The SSE response of ``events``, with the stream faults ``faults`` injects into this call."""
    cut_at: int | None = None
    if faults is not None and faults.applies_to(call_number):
        if faults.malformed_chunk:
            events = list(events)
            events.insert(len(events) // 2, 'data: {"id": "chatcmpl-broken", "choices": [\n\n')
        if faults.cut_stream:
            cut_at = max(1, len(events) // 2)

    async def body() -> AsyncIterator[str]:
        for i, event in enumerate(events):
            if cut_at is not None and i == cut_at:
                raise _StreamCut(f"injected fault: stream cut after {cut_at} events")
            yield event

    return StreamingResponse(
        body(),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


class _ServingThread:
    """``app`` under uvicorn on a daemon thread with an event loop of its own; construction
    returns once it accepts connections (on ``port``, or a free one for 0)."""

    def __init__(self, app: FastAPI, host: str, port: int) -> None:
        # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY on accepted sockets only when the
        # proto says TCP, and without it every response pays a ~40 ms delayed-ACK stall.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.bind((host, port))
        except OSError:
            sock.close()
            raise
        host, port = sock.getsockname()[:2]
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            log_level="warning",
            access_log=True,  # dropped by log_level; False would make the logger non-propagating
            lifespan="off",
            ws="none",
            timeout_keep_alive=120,
            timeout_graceful_shutdown=_GRACEFUL_SHUTDOWN_S,
            backlog=4096,
        )
        server = uvicorn.Server(config)
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            executor = ThreadPoolExecutor(_POLICY_THREADS, thread_name_prefix="osmosis-policy")
            loop.set_default_executor(executor)
            try:
                loop.run_until_complete(server.serve(sockets=[sock]))
            except BaseException as exc:  # reported to start() or logged below
                failure.append(exc)
                logger.exception("policy server on port %s crashed", port)
            finally:
                _close_loop(loop)
                executor.shutdown(wait=False, cancel_futures=True)
                sock.close()

        thread = threading.Thread(target=run, name=f"osmosis-policy-server:{port}", daemon=True)
        thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not server.started:
            if failure or not thread.is_alive():
                thread.join(1.0)
                raise RuntimeError(f"policy server failed to start on {host}:{port}") from (
                    failure[0] if failure else None
                )
            if time.monotonic() > deadline:
                server.should_exit = True
                thread.join(_STOP_TIMEOUT_S)
                raise RuntimeError(f"policy server did not start within {_START_TIMEOUT_S} s")
            time.sleep(0.005)
        self.thread, self.server = thread, server
        self.base_url = f"http://{host}:{port}"

    def stop(self) -> None:
        """Stop serving, bounded (~5 s): hung calls are cut."""
        self.server.should_exit = True
        self.thread.join(_STOP_TIMEOUT_S - 0.5)
        if self.thread.is_alive():
            self.server.force_exit = True
            self.thread.join(0.5)


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still pending (e.g. LiteLLM's logging worker), then close, as asyncio.run does."""
    try:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.wait(pending, timeout=1.0))
        loop.run_until_complete(loop.shutdown_asyncgens())
    except Exception:  # a failing cleanup must not hide the server's own outcome
        logger.debug("policy server loop cleanup failed", exc_info=True)
    finally:
        loop.close()


def create_policy_router(server: PolicyServer) -> APIRouter:
    """The chat-completions route of ``server``, to mount on another FastAPI app if wanted."""
    router = APIRouter()

    @router.post("/v1/rollouts/{rollout_id}/chat/completions")
    async def chat_completions(rollout_id: str, request: Request) -> Response:
        return await server.handle(rollout_id, request)

    @router.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return router
