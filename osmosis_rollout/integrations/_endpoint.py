"""A lean stand-in for ``litellm.acompletion`` on the rollout-scoped chat endpoint.

The integrations only ever talk to one OpenAI-compatible endpoint (the rollout's
``chat_completions_url``) with the model ``litellm_proxy/osmosis-rollout``. LiteLLM's
100-provider router costs ~13 ms of CPU per streamed call there (its ``Logging``, model-map
scans for the unknown model, a pydantic object per chunk), against ~2 ms for the request
itself. :class:`LeanLitellm` answers the same ``acompletion(**kwargs)`` call over one pooled
httpx client per event loop, and sends what LiteLLM sends for those arguments, byte for byte:
same path (``base_url`` + ``/chat/completions``), same compact JSON body, same key order.

Only the arguments the rollout models pass in practice take the lean path (``temperature``,
``max_tokens``, ``tools``, ``stream`` and LiteLLM's own no-op flags); a call with any other
argument set (``top_p``, ``tool_choice``, ``response_format``, extra body fields, ...) is
handed to the real ``litellm.acompletion`` unchanged, so no request shape ever differs.

Streamed replies come back as an async iterator of OpenAI ``ChatCompletionChunk`` objects
(what the frameworks' stream handlers read); plain replies as a LiteLLM ``ModelResponse``
(what their non-streaming paths read). An HTTP error or a malformed stream raises
:class:`~osmosis_rollout.errors.PolicyError` naming the endpoint and the status.

A speed shortcut (see :mod:`osmosis_rollout._internal.shortcuts`): ``OSMOSIS_NO_SHORTCUTS=1`` hands
every call to ``litellm.acompletion``.
"""

from __future__ import annotations

import json
import sys
import types
from collections.abc import AsyncIterator, Mapping
from types import ModuleType
from typing import Any

import httpx

from osmosis_rollout._internal.shortcuts import shortcuts_enabled
from osmosis_rollout.chat_client import _shared_client, sse_chunks
from osmosis_rollout.errors import PolicyError
from osmosis_rollout.transport.telemetry import model_call

_PROVIDER_PREFIX = "litellm_proxy/"

# Body keys in the order LiteLLM writes them for an OpenAI-compatible endpoint.
_BODY_ORDER = ("temperature", "max_tokens", "tools")
_STREAM_OPTIONS = "stream_options"

# Arguments that never reach the wire (LiteLLM consumes them), or that are always given.
_CONSUMED = frozenset(
    {"model", "messages", "stream", "api_key", "base_url", "extra_headers", "_skip_mcp_handler"}
)


def _json_bytes(body: Mapping[str, Any]) -> bytes:
    """The body as LiteLLM's OpenAI client serialises it: compact, UTF-8, no NaN."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _drop_nulls(message: Any) -> Any:
    """A message without its ``None`` fields, as LiteLLM sends it (``content: null`` too)."""
    if not isinstance(message, Mapping):
        return message
    return {key: value for key, value in message.items() if value is not None}


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
        body = self.lean_body(kwargs) if shortcuts_enabled() else None
        if body is None:
            return await self._litellm.acompletion(**kwargs)
        base_url = str(kwargs.get("base_url") or kwargs.get("api_base"))
        url = base_url.rstrip("/") + "/chat/completions"
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            **{str(k): str(v) for k, v in (kwargs.get("extra_headers") or {}).items()},
        }
        api_key = kwargs.get("api_key")
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        content = _json_bytes(body)
        client = _shared_client()
        if body.get("stream"):
            return _stream_chunks(client, url, headers, content)
        with model_call(url, stream=False):
            response = await client.post(url, content=content, headers=headers)
        await _raise_for_status(response, url)
        try:
            payload = response.json()
        except ValueError as exc:
            raise PolicyError(
                f"chat completions endpoint {url} answered non-JSON: {response.text[:500]!r}"
            ) from exc
        return self._litellm.ModelResponse(**payload)


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


async def _raise_for_status(response: httpx.Response, url: str) -> None:
    if response.status_code < 400:
        return
    detail = (await response.aread()).decode("utf-8", "replace")[:1000]
    raise PolicyError(
        f"chat completions endpoint {url} answered HTTP {response.status_code}: {detail}"
    )


async def _stream_chunks(
    client: httpx.AsyncClient, url: str, headers: dict[str, str], content: bytes
) -> AsyncIterator[Any]:
    """The SSE reply as OpenAI ``ChatCompletionChunk`` objects (one JSON parse per event)."""
    from openai.types.chat import ChatCompletionChunk

    validate = ChatCompletionChunk.model_validate
    with model_call(url, stream=True):
        async with client.stream("POST", url, content=content, headers=headers) as response:
            await _raise_for_status(response, url)
            async for chunk in sse_chunks(response.aiter_lines(), url):
                yield validate(chunk)
                if chunk.get("usage") and chunk.get("choices"):
                    # Usage riding on a chunk with choices also comes alone, as LiteLLM splits
                    # it: Strands stops reading choices at the finish reason and takes usage
                    # after.
                    yield validate({**chunk, "choices": []})


__all__ = ["LeanLitellm", "lean_methods", "on_lean_endpoint"]
