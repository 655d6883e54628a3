"""Where an LLM judge's LiteLLM call goes and how its failures are reported.

:class:`JudgeProvider` reads the provider from a model id (``openai/gpt-4.1-mini``, or a bare
``gpt-``/``claude``/``gemini``/``grok`` name) with its default timeout; :func:`resolve_api_key`
finds the key (``api_key=`` or the provider's environment variable) or raises
:class:`~osmosis_rollout.errors.MissingAPIKeyError`; :func:`call_provider` makes one call and
raises failures as the official SDK's rubric errors (``ModelNotFoundError``,
``ProviderRequestError``, ``MissingAPIKeyError``). Used by
:func:`osmosis_rollout.rubric.evaluate_rubric`; LiteLLM is only imported by the call itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from osmosis_rollout.errors import (
    MissingAPIKeyError,
    ModelNotFoundError,
    PolicyError,
    ProviderRequestError,
)
from osmosis_rollout.integrations._litellm import import_litellm
from osmosis_rollout.policy import ChatRequest, LiteLLMPolicy

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_JUDGE_MODEL",
    "DEFAULT_REQUEST_TIMEOUT_SECONDS",
    "JudgeProvider",
    "call_provider",
    "provider_error",
    "resolve_api_key",
    "verdict_format",
]

#: The judge model when none is given: one that takes the official request's temperature 0
#: and a JSON schema (gpt-5 models refuse temperature 0 while reasoning).
DEFAULT_JUDGE_MODEL = "openai/gpt-4.1-mini"

#: The environment variable each provider's key is read from (LiteLLM reads the same ones;
#: the official SDK's name).
DEFAULT_API_KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "xai": "XAI_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "google": "GEMINI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "cerebras": "CEREBRAS_API_KEY",
    "azure": "AZURE_API_KEY",
    "bedrock": "AWS_ACCESS_KEY_ID",
    "vertex_ai": "GOOGLE_APPLICATION_CREDENTIALS",
}
# Bare model-name prefixes and the provider they imply.
_BARE_PREFIXES = (
    (("gpt-", "o1-", "o3-", "o4-"), "openai"),
    (("claude",), "anthropic"),
    (("gemini",), "gemini"),
    (("grok",), "xai"),
)
DEFAULT_REQUEST_TIMEOUT_SECONDS = 30.0

#: The verdict's JSON schema, as the official SDK sends it in ``response_format``.
VERDICT_SCHEMA: dict[str, Any] = {
    "name": "rubric_response",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"score": {"type": "number"}, "explanation": {"type": "string"}},
        "required": ["score", "explanation"],
        "additionalProperties": False,
    },
}
# Slower providers get longer, as in the official SDK.
_PROVIDER_TIMEOUT_SEC = {"xai": 45.0, "gemini": 45.0, "cerebras": 60.0, "openrouter": 60.0}


@dataclass(frozen=True)
class JudgeProvider:
    """Where a LiteLLM judge call goes: provider, model ids and default timeout."""

    name: str
    bare_model: str
    litellm_model: str
    timeout: float

    @classmethod
    def of(cls, model: str) -> JudgeProvider:
        """The provider of a LiteLLM model id; ``ValueError`` for an empty one."""
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f"model must be a LiteLLM model id such as {DEFAULT_JUDGE_MODEL!r}")
        model = model.strip()
        if "/" in model:
            name, bare = model.split("/", 1)
            name = name.lower()
            litellm_model = model
        else:
            lowered = model.lower()
            name = next(
                (provider for prefixes, provider in _BARE_PREFIXES if lowered.startswith(prefixes)),
                "",
            )
            bare = model
            litellm_model = f"{name}/{model}" if name else model
        timeout = _PROVIDER_TIMEOUT_SEC.get(name, DEFAULT_REQUEST_TIMEOUT_SECONDS)
        if name == "xai" and bare.lower().startswith("grok-4"):
            timeout = 60.0
        return cls(name=name, bare_model=bare, litellm_model=litellm_model, timeout=timeout)


def resolve_api_key(
    target: JudgeProvider, api_key: str | None, params: Mapping[str, Any]
) -> str | None:
    """The key to send, or ``None`` to let LiteLLM find one; raises when there is none."""
    if isinstance(api_key, str) and api_key.strip():
        return api_key.strip()
    if params.get("api_key"):
        return str(params["api_key"])
    if not target.name or "api_base" in params or "mock_response" in params:
        # No provider to look a key up for, or a local endpoint / mock that needs none.
        return None
    env_name = DEFAULT_API_KEY_ENV.get(target.name, f"{target.name.upper()}_API_KEY")
    found = os.environ.get(env_name, "").strip()
    if not found:
        raise MissingAPIKeyError(
            f"Environment variable {env_name!r} is not set: export it with your "
            f"{target.name} API key, or pass api_key=, before calling evaluate_rubric "
            f"(judge model {target.litellm_model!r})"
        )
    return found


def verdict_format(target: JudgeProvider | None) -> dict[str, Any]:
    """The official request's ``response_format``: the verdict schema (``json_schema``), or
    ``{"type": "json_object"}`` for a LiteLLM model that LiteLLM says takes no schema.

    A judge policy (``target`` ``None``) gets the schema: there is no model to ask about.
    """
    schema = {"type": "json_schema", "json_schema": VERDICT_SCHEMA}
    if target is None:
        return schema
    litellm = import_litellm()  # offline: the bundled cost map answers
    if litellm.supports_response_schema(model=target.litellm_model, custom_llm_provider=None):
        return schema
    return {"type": "json_object"}


async def call_provider(
    judge: LiteLLMPolicy, request: ChatRequest, target: JudgeProvider, key_given: bool
) -> Any:
    """One LiteLLM judge call, its failures raised as the official SDK's rubric errors."""
    try:
        return await judge.complete(request)
    except (ProviderRequestError, MissingAPIKeyError, TypeError, ValueError):
        raise
    except Exception as exc:
        raise provider_error(exc, target, key_given) from exc


def provider_error(exc: Exception, target: JudgeProvider, key_given: bool) -> Exception:
    """The official rubric error for a failed call (``exc`` is chained by the caller)."""
    litellm = sys.modules.get("litellm")
    provider = target.name  # "" when the model names none, as in the official errors
    if litellm is not None and isinstance(exc, litellm.NotFoundError):
        return ModelNotFoundError(
            provider,
            target.bare_model,
            f"Model {target.bare_model!r} was not found. Check the model id and that your "
            f"{provider} account has access to it.",
        )
    if litellm is not None and isinstance(exc, litellm.AuthenticationError) and not key_given:
        return MissingAPIKeyError(
            f"No API key found for judge model {target.litellm_model!r}: pass api_key= or set "
            "the provider's environment variable (e.g. OPENAI_API_KEY)"
        )
    if isinstance(exc, PolicyError):
        return ProviderRequestError(provider, target.bare_model, str(exc))
    detail = getattr(exc, "message", None)
    if not isinstance(detail, str) or not detail.strip():
        detail = str(exc).strip() or f"{type(exc).__name__} while contacting the provider"
    return ProviderRequestError(provider, target.bare_model, detail)
