"""OpenAI-compatible model servers called through the ``openai`` SDK, without LiteLLM.

:class:`~osmosis_rollout.policy.LiteLLMPolicy` sends a call here instead of to
``litellm.acompletion`` when its model is served by an OpenAI-compatible chat-completions
server that LiteLLM would only forward to. LiteLLM's per-call work (its logging object,
provider routing, a response object per call) costs several milliseconds of CPU per call,
which is what bounds rollouts per second against a fast local vLLM or SGLang server.

The routing rule (:func:`openai_route`), decided once when the policy is made:

- ``force_litellm=True`` (``--osmosis-force-litellm``): LiteLLM, always.
- ``hosted_vllm/MODEL``: here, at ``api_base`` or ``$HOSTED_VLLM_API_BASE``, with
  ``api_key`` or ``$HOSTED_VLLM_API_KEY`` (else ``fake-api-key``, as LiteLLM sends).
  LiteLLM's vLLM request fixes are applied (``strict`` and ``additionalProperties: false``
  dropped from tool schemas, ``thinking_blocks`` from assistant messages).
- ``litellm_proxy/MODEL``: here, at ``api_base`` or ``$LITELLM_PROXY_API_BASE``, with
  ``api_key`` or ``$LITELLM_PROXY_API_KEY`` (LiteLLM forwards such a call untransformed).
- ``openai/MODEL`` with a base URL (``api_base``/``base_url``, else ``$OPENAI_BASE_URL``
  or ``$OPENAI_API_BASE``) that is not OpenAI's own API: here, with ``api_key`` or
  ``$OPENAI_API_KEY``. Against ``api.openai.com`` (or with no base URL) LiteLLM keeps the
  call: it rewrites parameters per OpenAI model (``max_completion_tokens`` and the dropped
  sampling parameters of reasoning models), which a plain forward would not.
- LiteLLM otherwise: every other provider; a call with no key where one is needed (so the
  error is LiteLLM's); default parameters only LiteLLM understands (``mock_response``,
  ``fallbacks``, ``litellm_*``, ...).

Here a call is one ``POST {base}/chat/completions`` with the request's own fields (the
refused ones already dropped by the policy), streamed when the request streams
(``stream_options.include_usage`` added so usage comes back), on one pooled ``AsyncOpenAI``
client per policy and event loop (a connection belongs to the loop that opened it; the
plugin's policy endpoint runs one loop). It holds at most ``max_connections`` connections,
kept alive between calls, in pools of 16 (:mod:`~osmosis_rollout.transport.connection_pools`).
Retries are the SDK's: ``num_retries`` (else ``max_retries``, else 2) retries of connection
errors, 408, 409, 429 and 5xx, waiting what ``Retry-After`` / ``retry-after-ms`` says (else
an exponential backoff). A failure raises the SDK's error
(``RateLimitError``, ``InternalServerError``, ... with its ``status_code``), the names
LiteLLM's errors carry. The cost is LiteLLM's cost map's price for the model when it has
one (:func:`~osmosis_rollout.policy.accounting.litellm_cost`).
"""

from __future__ import annotations

import asyncio
import json
import os
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from osmosis_rollout._internal.imports import require_extra
from osmosis_rollout.errors import PolicyError
from osmosis_rollout.policy.accounting import litellm_cost
from osmosis_rollout.policy.types import ChatReply, Usage, reply_tool_calls
from osmosis_rollout.transport.chunks import StreamFold
from osmosis_rollout.transport.connection_pools import keepalive_transport, openai_http

__all__ = ["OpenAICompatibleClient", "OpenAIRoute", "openai_route"]

DEFAULT_RETRIES = 2
"""Retries when neither ``num_retries`` nor ``max_retries`` is given (LiteLLM's OpenAI default)."""
DEFAULT_TIMEOUT_S = 600.0
"""Seconds a call may take when no ``timeout`` is given (the ``openai`` SDK's default)."""
DEFAULT_MAX_CONNECTIONS = 32
"""Pool size when the policy is not told how many calls run at once."""

_OPENAI_HOSTS = frozenset({"api.openai.com"})

#: Keyword arguments that configure the call rather than travel in its body.
_CLIENT_PARAMS = frozenset(
    {
        "api_key",
        "api_base",
        "base_url",
        "organization",
        "timeout",
        "request_timeout",
        "num_retries",
        "max_retries",
        "drop_params",
        "extra_headers",
        "headers",
    }
)
#: Default parameters only LiteLLM acts on: a policy given one keeps every call on LiteLLM.
_LITELLM_ONLY = frozenset(
    {
        "mock_response",
        "mock_tool_calls",
        "fallbacks",
        "context_window_fallback_dict",
        "caching",
        "cache",
        "custom_llm_provider",
        "input_cost_per_token",
        "output_cost_per_token",
        "base_model",
        "api_version",
        "callbacks",
        "success_callback",
        "failure_callback",
        "metadata",
        "model_list",
        "additional_drop_params",
        "allowed_openai_params",
    }
)
_LITELLM_ONLY_PREFIXES = ("litellm_", "aws_", "vertex_", "azure_", "_")


@dataclass(frozen=True)
class OpenAIRoute:
    """Where and how an OpenAI-compatible call goes: resolved once, when the policy is made."""

    provider: str
    """``openai``, ``hosted_vllm`` or ``litellm_proxy``: the LiteLLM provider prefix."""
    model: str
    """The model as the server names it (the id without its provider prefix)."""
    base_url: str
    api_key: str = field(repr=False)
    organization: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_RETRIES
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def _retries(params: Mapping[str, Any]) -> int:
    for name in ("num_retries", "max_retries"):
        value = params.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"LiteLLMPolicy: {name} must be a whole number >= 0, got {value!r}"
                )
            return value
    return DEFAULT_RETRIES


def _timeout(params: Mapping[str, Any]) -> float:
    value = params.get("timeout", params.get("request_timeout"))
    if value is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"LiteLLMPolicy: timeout must be a number of seconds > 0, got {value!r}")
    return float(value)


def openai_route(
    model: str, params: Mapping[str, Any], *, force_litellm: bool = False
) -> OpenAIRoute | None:
    """The OpenAI-compatible route for ``model`` and default ``params``, or None for LiteLLM.

    The rule is the module docstring's; environment variables are read now.
    """
    if force_litellm:
        return None
    provider, _, bare = model.partition("/")
    if not bare or any(
        name in _LITELLM_ONLY or name.startswith(_LITELLM_ONLY_PREFIXES) for name in params
    ):
        return None
    given_base = params.get("api_base") or params.get("base_url")
    given_key = params.get("api_key")
    if provider == "hosted_vllm":
        base = given_base or _env("HOSTED_VLLM_API_BASE")
        key = given_key or _env("HOSTED_VLLM_API_KEY") or "fake-api-key"
    elif provider == "litellm_proxy":
        base = given_base or _env("LITELLM_PROXY_API_BASE")
        key = given_key or _env("LITELLM_PROXY_API_KEY")
    elif provider == "openai":
        base = given_base or _env("OPENAI_BASE_URL", "OPENAI_API_BASE")
        key = given_key or _env("OPENAI_API_KEY")
        if base and (urlsplit(str(base)).hostname or "").lower() in _OPENAI_HOSTS:
            return None
    else:
        return None
    if not isinstance(base, str) or not base or not isinstance(key, str) or not key:
        return None
    headers = params.get("extra_headers") or params.get("headers") or {}
    organization = params.get("organization")
    if provider == "openai" and organization is None:
        organization = _env("OPENAI_ORGANIZATION")
    return OpenAIRoute(
        provider=provider,
        model=bare,
        base_url=base.rstrip("/"),
        api_key=key,
        organization=organization if isinstance(organization, str) else None,
        timeout_s=_timeout(params),
        max_retries=_retries(params),
        headers={str(k): str(v) for k, v in dict(headers).items()},
    )


def _without_strict(schema: Any) -> Any:
    """A tool schema without ``strict`` and ``additionalProperties: false`` (vLLM's fixes)."""
    if isinstance(schema, dict):
        return {
            key: _without_strict(value)
            for key, value in schema.items()
            if key != "strict" and not (key == "additionalProperties" and value is False)
        }
    if isinstance(schema, list):
        return [_without_strict(item) for item in schema]
    return schema


def _clean_message(message: Any, vllm: bool) -> Any:
    """A message without its ``None`` fields (as LiteLLM sends it), vLLM's fixes applied."""
    if not isinstance(message, dict):
        return message
    cleaned = {key: value for key, value in message.items() if value is not None}
    if vllm and cleaned.get("role") == "assistant":
        cleaned.pop("thinking_blocks", None)
        if not isinstance(cleaned.get("reasoning_content", ""), str):
            cleaned.pop("reasoning_content")
    return cleaned


class OpenAICompatibleClient:
    """Send chat-completions calls down one :class:`OpenAIRoute`; see the module docstring.

    ``max_connections`` bounds the pool (calls beyond it wait for a free connection).
    """

    def __init__(self, route: OpenAIRoute, *, max_connections: int | None = None) -> None:
        if max_connections is not None and (
            isinstance(max_connections, bool)
            or not isinstance(max_connections, int)
            or max_connections < 1
        ):
            raise ValueError(
                f"max_connections must be a whole number >= 1, got {max_connections!r}"
            )
        self.route = route
        self.max_connections = max_connections or DEFAULT_MAX_CONNECTIONS
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._priced: bool | None = None

    def __repr__(self) -> str:
        return f"OpenAICompatibleClient({self.route.model!r} at {self.route.base_url})"

    def _client(self) -> Any:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            openai = require_extra("openai", extra="litellm")
            route = self.route
            http = openai_http(openai)
            # One TLS context, loaded once, not once per pool.
            transport = keepalive_transport(http, self.max_connections, http.create_ssl_context())
            client = openai.AsyncOpenAI(
                api_key=route.api_key,
                organization=route.organization,
                base_url=route.base_url,
                timeout=route.timeout_s,
                max_retries=route.max_retries,
                default_headers=dict(route.headers) or None,
                http_client=openai.DefaultAsyncHttpxClient(
                    transport=transport, timeout=route.timeout_s
                ),
            )
            self._clients[loop] = client
        return client

    def body(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON body sent for the policy's LiteLLM-style ``kwargs`` (model and messages first)."""
        vllm = self.route.provider == "hosted_vllm"
        body: dict[str, Any] = {
            "model": self.route.model,
            "messages": [_clean_message(message, vllm) for message in kwargs["messages"]],
        }
        for name, value in kwargs.items():
            if name in _CLIENT_PARAMS or name in body or value is None:
                continue
            body[name] = _without_strict(value) if vllm and name == "tools" else value
        if body.get("stream"):
            options = dict(body.get("stream_options") or {})
            options["include_usage"] = True
            body["stream_options"] = options
        else:
            body.pop("stream", None)
            body.pop("stream_options", None)
        return body

    async def complete(self, kwargs: Mapping[str, Any]) -> ChatReply:
        """Send one call built from ``kwargs`` and normalise the reply."""
        openai = require_extra("openai", extra="litellm")
        body = self.body(kwargs)
        client = self._client()
        if body.get("stream"):
            chunks = await client.post(
                "/chat/completions",
                body=body,
                cast_to=object,
                stream=True,
                stream_cls=openai.AsyncStream[object],
            )
            payload = await _assemble(chunks)
        else:
            payload = await client.post("/chat/completions", body=body, cast_to=object)
        return self._reply(payload)

    def _reply(self, payload: Any) -> ChatReply:
        route = self.route
        if not isinstance(payload, dict):
            raise PolicyError(
                f"model {route.model!r} at {route.base_url} answered {type(payload).__name__}, "
                "not a chat.completion object"
            )
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise PolicyError(f"model {route.model!r} at {route.base_url} returned no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            message = {}
        calls = reply_tool_calls(message)
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                str(part.get("text") or "") for part in content if isinstance(part, dict)
            )
        elif content is not None and not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        finish = choice.get("finish_reason") or ("tool_calls" if calls else "stop")
        return ChatReply(
            content=content,
            tool_calls=calls,
            finish_reason=str(finish),
            usage=self._usage(payload.get("usage")),
        )

    def _usage(self, raw: Any) -> Usage | None:
        if not isinstance(raw, dict):
            return None
        prompt = int(raw.get("prompt_tokens") or 0)
        completion = int(raw.get("completion_tokens") or 0)
        cost = None
        if self._priced is not False:
            cost = litellm_cost(self.route.provider, self.route.model, prompt, completion)
            # The cost map knows a model or not: ask once, not on every call.
            self._priced = cost is not None
        return Usage(prompt_tokens=prompt, completion_tokens=completion, cost=cost)


async def _assemble(chunks: Any) -> dict[str, Any]:
    """One ``chat.completion`` dict from a stream of ``chat.completion.chunk`` dicts."""
    fold = StreamFold()
    async for chunk in chunks:
        fold.add(chunk)
    if not (fold.content or fold.calls or fold.finish_reason or fold.role_seen):
        raise PolicyError("the model's stream ended without a choice")
    message: dict[str, Any] = {"role": "assistant", "content": fold.text()}
    if fold.calls:
        message["tool_calls"] = [fold.calls[index] for index in sorted(fold.calls)]
    return {
        "choices": [{"index": 0, "message": message, "finish_reason": fold.finish_reason}],
        "usage": fold.usage,
    }
