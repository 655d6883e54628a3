"""A lean stand-in for ``litellm.acompletion`` on the rollout-scoped chat endpoint.

The integrations only ever talk to one OpenAI-compatible endpoint (the rollout's
``chat_completions_url``) with the model ``litellm_proxy/osmosis-rollout``. For that call
LiteLLM builds a body and hands it to the ``openai`` SDK (``AsyncOpenAI.post``), around which
its 100-provider router costs milliseconds of CPU per call (its ``Logging``, model-map scans
for the unknown model, a pydantic object per chunk), against ~1 ms for the request itself.
:class:`LeanLitellm` answers the same ``acompletion(**kwargs)`` call by doing only the middle
part: the body LiteLLM builds, posted through the same SDK call, so that what the SDK owns is
the SDK's, not a copy:

- the request: path (``base_url`` + ``/chat/completions``), body, headers;
- retries: LiteLLM's default of 2 (``litellm.DEFAULT_MAX_RETRIES``) for connection errors,
  timeouts, 408, 409, 429 and 5xx, with the SDK's back-off and its reading of
  ``Retry-After`` / ``retry-after-ms``;
- errors: whatever the SDK raises is mapped by LiteLLM's own ``exception_type``, from the
  same wrapped error LiteLLM's OpenAI handler gives it, so a caller gets LiteLLM's
  ``RateLimitError``, ``InternalServerError``, ``APIConnectionError``, ... (subclasses of the
  ``openai`` SDK's), with LiteLLM's message.

Only the arguments the rollout models pass in practice take the lean path (``temperature``,
``max_tokens``, ``tools``, ``stream`` and LiteLLM's own no-op flags); a call with any other
argument set (``top_p``, ``tool_choice``, ``max_retries``, ``timeout``, extra body fields, ...)
is handed to the real ``litellm.acompletion`` unchanged, and so is every call of a process
that set LiteLLM's global ``num_retries`` or a callback (a user's logger sees every call). Streamed replies come back as an
async iterator of OpenAI ``ChatCompletionChunk`` objects (what the frameworks' stream handlers
read); plain replies as a LiteLLM ``ModelResponse`` (what their non-streaming paths read).
``tests/integrations/test_lean_endpoint.py`` runs both paths side by side (request bytes,
items, errors, retries).

A speed shortcut (see :mod:`osmosis_rollout._internal.shortcuts`): ``OSMOSIS_NO_SHORTCUTS=1``
hands every call to ``litellm.acompletion``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import types
import weakref
from collections.abc import AsyncIterator, Mapping
from types import ModuleType
from typing import Any

from osmosis_rollout._internal.shortcuts import shortcuts_enabled
from osmosis_rollout.transport.connection_pools import (
    LOOP_CONNECTIONS,
    keepalive_transport,
    openai_http,
)
from osmosis_rollout.transport.telemetry import model_call

_PROVIDER = "litellm_proxy"
_PROVIDER_PREFIX = _PROVIDER + "/"

# Body keys in the order LiteLLM writes them for an OpenAI-compatible endpoint.
_BODY_ORDER = ("temperature", "max_tokens", "tools")
_STREAM_OPTIONS = "stream_options"

# Arguments that never reach the wire (LiteLLM consumes them), or that are always given.
_CONSUMED = frozenset(
    {"model", "messages", "stream", "api_key", "base_url", "extra_headers", "_skip_mcp_handler"}
)

_RAW_RESPONSE_HEADER = "X-Stainless-Raw-Response"


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def _drop_nulls(message: Any) -> Any:
    """A message without its ``None`` fields, as LiteLLM sends it (``content: null`` too)."""
    if not isinstance(message, Mapping):
        return message
    return {key: value for key, value in message.items() if value is not None}


def _loop_client(litellm: ModuleType) -> Any:
    """One ``AsyncOpenAI`` per event loop (a connection belongs to the loop that opened it).

    Its retries are LiteLLM's default for an OpenAI-compatible call; each call copies it
    with its rollout's URL and key and LiteLLM's timeout (the copy shares the connection
    pools).
    """
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        import openai

        http = openai_http(openai)
        # One TLS context, loaded once, not once per pool.
        transport = keepalive_transport(http, LOOP_CONNECTIONS, http.create_ssl_context())
        client = openai.AsyncOpenAI(
            api_key="unset",  # every call's copy carries the rollout's key and timeout
            max_retries=litellm.DEFAULT_MAX_RETRIES,
            http_client=openai.DefaultAsyncHttpxClient(transport=transport),
        )
        _clients[loop] = client
    return client


def _request_timeout(litellm: ModuleType) -> float:
    """The timeout LiteLLM gives the SDK: ``litellm.request_timeout`` where configured, else
    its fallback for completions (600 s)."""
    try:
        from litellm.constants import COMPLETION_HTTP_FALLBACK_SECONDS
        from litellm.litellm_core_utils.request_timeout_resolver import (
            get_configured_request_timeout,
        )
    except ImportError:  # releases before the resolver passed request_timeout as it is
        return float(litellm.request_timeout)
    configured = get_configured_request_timeout()
    return float(COMPLETION_HTTP_FALLBACK_SECONDS if configured is None else configured)


_GLOBAL_HOOKS = (
    "callbacks",
    "success_callback",
    "failure_callback",
    "input_callback",
    "_async_success_callback",
    "_async_failure_callback",
    "_async_input_callback",
)
"""LiteLLM's module-level callback lists: a user's logger there must see every call."""


def _litellm_at_defaults(litellm: ModuleType) -> bool:
    """True unless the user set LiteLLM's global retries or callbacks, which only
    ``litellm.acompletion`` honours (such a process sends every call through it)."""
    if getattr(litellm, "num_retries", None) is not None:
        return False
    return not any(getattr(litellm, name, None) for name in _GLOBAL_HOOKS)


class LeanLitellm:
    """Quacks like the ``litellm`` module for ``acompletion`` and ``types``; see the module doc."""

    def __init__(self, litellm: ModuleType) -> None:
        self._litellm = litellm
        self.types = litellm.types

    def __getattr__(self, name: str) -> Any:
        return getattr(self._litellm, name)

    def lean_body(self, kwargs: Mapping[str, Any]) -> dict[str, Any] | None:
        """The wire body LiteLLM would send for ``kwargs``, or ``None`` if not a lean call."""
        model = kwargs.get("model")
        base_url = kwargs.get("base_url") or kwargs.get("api_base")
        if not (isinstance(model, str) and model.startswith(_PROVIDER_PREFIX)):
            return None
        if not isinstance(base_url, str) or "?" in base_url:
            return None
        if not kwargs.get("api_key"):
            return None  # LiteLLM refuses a keyless call with its own error: keep that
        for key, value in kwargs.items():
            if key in _CONSUMED or key in _BODY_ORDER or key in ("api_base", _STREAM_OPTIONS):
                continue
            if value is not None:
                return None
        body: dict[str, Any] = {
            "model": model[len(_PROVIDER_PREFIX) :],
            "messages": [_drop_nulls(message) for message in kwargs.get("messages") or ()],
        }
        for key in _BODY_ORDER:
            value = kwargs.get(key)
            if value is not None and value != []:
                body[key] = value
        if kwargs.get("stream"):
            body["stream"] = True
            if kwargs.get(_STREAM_OPTIONS) is not None:
                body[_STREAM_OPTIONS] = kwargs[_STREAM_OPTIONS]
        return body

    async def acompletion(self, **kwargs: Any) -> Any:
        """Serve a rollout-endpoint call lean; anything else goes to LiteLLM unchanged."""
        lean = shortcuts_enabled() and _litellm_at_defaults(self._litellm)
        body = self.lean_body(kwargs) if lean else None
        if body is None:
            return await self._litellm.acompletion(**kwargs)
        import openai

        base_url = str(kwargs.get("base_url") or kwargs.get("api_base")).rstrip("/")
        client = _loop_client(self._litellm).with_options(
            api_key=kwargs["api_key"], base_url=base_url, timeout=_request_timeout(self._litellm)
        )
        # LiteLLM asks the SDK for the raw response (to read its headers): the same header
        # goes out here, and the reply is parsed from the raw response as LiteLLM does.
        headers = {str(k): str(v) for k, v in (kwargs.get("extra_headers") or {}).items()}
        options = {"headers": {**headers, _RAW_RESPONSE_HEADER: "true"}}
        url = base_url + "/chat/completions"
        stream = bool(body.get("stream"))
        # The model call's span lasts until a stream's last chunk is read (or it fails).
        span = contextlib.ExitStack()
        span.enter_context(model_call(url, stream=stream))
        try:
            if stream:
                raw = await client.post(
                    "/chat/completions",
                    body=body,
                    options=options,
                    cast_to=object,
                    stream=True,
                    stream_cls=openai.AsyncStream[object],
                )
            else:
                raw = await client.post(
                    "/chat/completions", body=body, options=options, cast_to=object
                )
            parsed = raw.parse()
        except BaseException as exc:
            span.__exit__(type(exc), exc, exc.__traceback__)
            if isinstance(exc, Exception):
                raise self._litellm_error(exc, kwargs, wrap=True) from exc
            raise
        if stream:
            return self._chunks(parsed, kwargs, span)
        span.close()
        return self._litellm.ModelResponse(**parsed)

    async def _chunks(
        self, chunks: Any, kwargs: Mapping[str, Any], span: contextlib.ExitStack
    ) -> AsyncIterator[Any]:
        """The SSE reply as OpenAI ``ChatCompletionChunk`` objects; errors as LiteLLM's."""
        from openai.types.chat import ChatCompletionChunk

        validate = ChatCompletionChunk.model_validate
        try:
            async for chunk in chunks:
                yield validate(chunk)
                if chunk.get("usage") and chunk.get("choices"):
                    # Usage riding on a chunk with choices also comes alone, as LiteLLM splits
                    # it: Strands stops reading choices at the finish reason and takes usage
                    # after.
                    yield validate({**chunk, "choices": []})
        except Exception as exc:
            span.__exit__(type(exc), exc, exc.__traceback__)
            raise self._litellm_error(exc, kwargs, wrap=False) from exc
        finally:
            span.close()  # a no-op once exited above
            await chunks.close()

    def _litellm_error(
        self, exc: Exception, kwargs: Mapping[str, Any], *, wrap: bool
    ) -> BaseException:
        """``exc`` as ``litellm.acompletion`` raises it, mapped by LiteLLM's own code.

        Before the reply (``wrap``), LiteLLM's OpenAI handler wraps the SDK's error in its
        ``OpenAIError`` (status, message, headers, body) and ``acompletion`` maps that; an
        error while a stream is read is mapped as it comes.
        """
        from litellm.litellm_core_utils.exception_mapping_utils import exception_type
        from litellm.llms.openai.common_utils import OpenAIError

        original: Exception = exc
        if wrap:
            response = getattr(exc, "response", None)
            original = OpenAIError(
                status_code=getattr(exc, "status_code", 500),
                message=getattr(exc, "message", str(exc)),
                headers=getattr(exc, "headers", None) or getattr(response, "headers", None),
                body=getattr(exc, "body", None),
            )
        try:
            mapped: BaseException = exception_type(
                model=kwargs["model"],
                original_exception=original,
                custom_llm_provider=_PROVIDER,
                completion_kwargs=dict(kwargs),
                extra_kwargs={},
            )
        except Exception as raised:  # releases that raise the mapped error instead
            mapped = raised
        return mapped


def on_lean_endpoint(fn: Any) -> Any:
    """A copy of ``fn`` (a framework's LiteLLM model method) whose ``litellm`` is lean.

    The framework's own request building (message conversion, tools, settings) runs
    unchanged, for every supported release; only its ``litellm.acompletion`` call is
    answered by :class:`LeanLitellm`. Nothing global is patched: the copy gets its own
    globals (a snapshot of its module's, with ``litellm`` replaced).
    """
    module = sys.modules[fn.__module__]
    namespace = dict(vars(module))
    namespace["litellm"] = LeanLitellm(module.litellm)
    lean = types.FunctionType(fn.__code__, namespace, fn.__name__, fn.__defaults__, fn.__closure__)
    lean.__kwdefaults__ = fn.__kwdefaults__
    lean.__doc__ = fn.__doc__
    lean.__qualname__ = fn.__qualname__
    return lean


def lean_methods(cls: type) -> dict[str, Any]:
    """``cls``'s own methods that call ``litellm.*``, each :func:`on_lean_endpoint`."""
    return {
        name: on_lean_endpoint(value)
        for name, value in vars(cls).items()
        if isinstance(value, types.FunctionType) and "litellm" in value.__code__.co_names
    }


__all__ = ["LeanLitellm", "lean_methods", "on_lean_endpoint"]
