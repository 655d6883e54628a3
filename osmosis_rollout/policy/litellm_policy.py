"""A real model: ``LiteLLMPolicy("openai/gpt-5-mini")``, a local vLLM or Ollama, ...

Provider keys come from the environment exactly as LiteLLM reads them (``OPENAI_API_KEY``, ...),
or from ``api_key=``/``api_base=`` given here. A model on an OpenAI-compatible server of
your own (``hosted_vllm/...``, ``openai/...`` with a base URL that is not OpenAI's) is called
through the ``openai`` SDK on one pooled client (:mod:`osmosis_rollout.policy.openai_compatible`
states the rule); every other model goes through ``litellm.acompletion``, as does every call
with ``force_litellm=True``. LiteLLM is imported on the first call, never at import time.
"""

from __future__ import annotations

import logging
import math
from functools import cache
from typing import Any

from osmosis_rollout.errors import PolicyError
from osmosis_rollout.integrations._litellm import import_litellm, skip_mcp_handler_args
from osmosis_rollout.policy.openai_compatible import OpenAICompatibleClient, openai_route
from osmosis_rollout.policy.types import ChatReply, ChatRequest, Usage, field_of, reply_tool_calls

__all__ = ["LiteLLMPolicy"]

logger = logging.getLogger(__name__)

#: Request fields a rollout may not set: they would redirect the call or change its credentials.
_REFUSED_PARAMS = frozenset(
    {
        "api_key",
        "api_base",
        "base_url",
        "api_version",
        "organization",
        "custom_llm_provider",
        "callbacks",
        "success_callback",
        "failure_callback",
        "extra_headers",
        "headers",
        "timeout",
        "num_retries",
        "mock_response",
        "metadata",
        "user_api_key",
        "model_list",
    }
)
_REFUSED_PREFIXES = ("_", "litellm_", "aws_", "vertex_", "azure_")


@cache
class _KeysOutOfLiteLLMLogs(logging.Filter):
    """LiteLLM logs each call's arguments at DEBUG, ``api_key`` among them (some releases do):
    every key a policy was given is starred in LiteLLM's own records before a handler sees
    them."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.keys:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record that does not format is logging's to report
            return True
        clean = message
        for key in self.keys:
            clean = clean.replace(key, "[REDACTED:api_key]")
        if clean != message:
            record.msg, record.args = clean, None
        return True


_LITELLM_KEYS = _KeysOutOfLiteLLMLogs()
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
for _name in _LITELLM_LOGGERS:
    logging.getLogger(_name).addFilter(_LITELLM_KEYS)


def _response_cost(response: Any) -> float | None:
    """The call's cost in US dollars as LiteLLM priced it, or None for a model it cannot price."""
    hidden = getattr(response, "_hidden_params", None)
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost):
        return float(cost)
    return None


def _reply_from_response(response: Any, model: str) -> ChatReply:
    choices = field_of(response, "choices") or []
    if not choices:
        raise PolicyError(f"LiteLLM model {model!r} returned no choices")
    choice = choices[0]
    message = field_of(choice, "message") or {}
    calls = reply_tool_calls(message)
    content = field_of(message, "content")
    finish = field_of(choice, "finish_reason") or ("tool_calls" if calls else "stop")
    raw_usage = field_of(response, "usage")
    usage = None
    if raw_usage is not None:
        usage = Usage(
            prompt_tokens=int(field_of(raw_usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(field_of(raw_usage, "completion_tokens", 0) or 0),
            cost=_response_cost(response),
        )
    return ChatReply(
        content=content if isinstance(content, str) or content is None else str(content),
        tool_calls=calls,
        finish_reason=str(finish),
        usage=usage,
    )


class LiteLLMPolicy:
    """Answer each call with the model ``model`` (a LiteLLM model id such as ``openai/gpt-5-mini``).

    ``default_params`` go to every call (``temperature=0``, ``api_base=...``, ``num_retries=2``,
    ``drop_params=True``, ...); the request's own sampling parameters (temperature, top_p,
    max_tokens, stop, seed, tool_choice, response_format, ...) override them. Request fields that
    would redirect the call or swap credentials (``api_key``, ``api_base``, callbacks,
    ``litellm_*``/``_*`` ...) are dropped.

    A model on an OpenAI-compatible server of your own is called through the ``openai`` SDK
    (streaming when the request streams), on one client whose pool holds ``max_connections``
    connections (the plugin passes ``--osmosis-concurrency``); ``route`` says which way calls
    go (``"openai"`` or ``"litellm"``). Everything else, and every call with
    ``force_litellm=True``, goes through ``litellm.acompletion`` (non-streaming).
    """

    def __init__(
        self,
        model: str,
        *,
        force_litellm: bool = False,
        max_connections: int | None = None,
        **default_params: Any,
    ) -> None:
        if not model or "/" not in model:
            raise ValueError(
                f"LiteLLMPolicy needs a LiteLLM model id such as 'openai/gpt-5-mini'; got {model!r}"
            )
        self.model = model
        self.default_params = default_params
        self.force_litellm = force_litellm
        key = default_params.get("api_key")
        if isinstance(key, str) and len(key) >= 8:
            _LITELLM_KEYS.keys.add(key)
        route = openai_route(model, default_params, force_litellm=force_litellm)
        self._openai = (
            None
            if route is None
            else OpenAICompatibleClient(route, max_connections=max_connections)
        )

    def __repr__(self) -> str:
        return f"LiteLLMPolicy({self.model!r})"

    @property
    def route(self) -> str:
        """``"openai"`` when calls go through the ``openai`` SDK, ``"litellm"`` otherwise."""
        return "litellm" if self._openai is None else "openai"

    @property
    def pool_size(self) -> int | None:
        """Connections the ``openai`` route's pool holds (None when calls go through LiteLLM)."""
        return None if self._openai is None else self._openai.max_connections

    def build_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments passed to ``litellm.acompletion`` for ``request``."""
        kwargs: dict[str, Any] = dict(self.default_params)
        for name, value in request.params.items():
            if name in _REFUSED_PARAMS or name.startswith(_REFUSED_PREFIXES):
                logger.debug("LiteLLMPolicy drops request field %r", name)
                continue
            kwargs[name] = value
        kwargs["model"] = self.model
        kwargs["messages"] = request.messages
        if request.tools:
            kwargs["tools"] = request.tools
        else:
            kwargs.pop("tool_choice", None)
            kwargs.pop("parallel_tool_calls", None)
        kwargs["stream"] = False
        return kwargs

    async def complete(self, request: ChatRequest) -> ChatReply:
        """Call the model and normalise its reply."""
        kwargs = self.build_kwargs(request)
        if self._openai is not None:
            kwargs["stream"] = request.stream
            return await self._openai.complete(kwargs)
        # LiteLLM's own import, offline (the bundled cost map), and its MCP workaround.
        litellm = import_litellm()
        response = await litellm.acompletion(**kwargs, **skip_mcp_handler_args())
        return _reply_from_response(response, self.model)
