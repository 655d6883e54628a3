"""Import LiteLLM once, without its network fetch, and hold the workarounds it needs.

LiteLLM downloads a remote model-cost map while it is imported (seconds, and far longer
where outbound HTTPS hangs). :func:`import_litellm` sets ``LITELLM_LOCAL_MODEL_COST_MAP``
with ``setdefault`` first, so the bundled map is used unless the user chose otherwise,
and every integration imports LiteLLM (directly or through a framework) after calling it.

MCP workaround: ``litellm.acompletion`` may route a call whose tools *might* name a
LiteLLM MCP gateway through its MCP handler, which imports ``mcp`` names that only exist
in newer ``mcp`` releases than Strands pins. Some LiteLLM releases (seen with 1.106)
took that path for ordinary function tools, so every Strands call with tools failed
before a request was sent, as an ``APIConnectionError``. Rollout tools are plain
functions, never gateway MCP servers, so the integrations pass :data:`SKIP_MCP_HANDLER`
(LiteLLM pops the flag before the request is built) through :func:`skip_mcp_handler_args`,
which leaves it out for releases older than that path: they do not know the flag and would
send it to the endpoint as a request field.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from osmosis_rollout._internal.imports import require_extra

LOCAL_COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"

ROLLOUT_MODEL_ID = "litellm_proxy/osmosis-rollout"
"""LiteLLM model id of the rollout policy; the wire carries ``model: "osmosis-rollout"``."""

SKIP_MCP_HANDLER: dict[str, Any] = {"_skip_mcp_handler": True}
"""Call parameters that keep LiteLLM off its MCP gateway path."""


def prepare_litellm_import() -> None:
    """Make a later ``import litellm`` (ours or a framework's) use the local cost map."""
    os.environ.setdefault(LOCAL_COST_MAP_ENV, "True")


def import_litellm(*, extra: str = "litellm") -> ModuleType:
    """Import and configure LiteLLM once; a missing install names ``extra``'s pip command."""
    prepare_litellm_import()
    litellm = require_extra("litellm", extra=extra)
    _configure(litellm)
    return litellm


def skip_mcp_handler_args() -> dict[str, Any]:
    """:data:`SKIP_MCP_HANDLER` where the installed LiteLLM reads the flag, else ``{}``."""
    return dict(SKIP_MCP_HANDLER) if _reads_skip_flag() else {}


@functools.cache
def _reads_skip_flag() -> bool:
    main = import_litellm().main
    try:
        source = Path(main.__file__ or "").read_text(encoding="utf-8")
    except OSError:
        # No source to read (a frozen install): pass the flag, as the releases that read it need.
        return True
    return next(iter(SKIP_MCP_HANDLER)) in source


@functools.cache
def _configure(litellm: Any) -> None:
    # The "Give Feedback / Get Help" banner on every provider error is noise in test output.
    litellm.suppress_debug_info = True


__all__ = [
    "LOCAL_COST_MAP_ENV",
    "ROLLOUT_MODEL_ID",
    "SKIP_MCP_HANDLER",
    "import_litellm",
    "prepare_litellm_import",
    "skip_mcp_handler_args",
]
