"""The rollout server: serve a backend to the Osmosis training controller over HTTP.

``create_rollout_server(backend=LocalBackend(...))`` returns a FastAPI app speaking the
remote-rollout protocol of osmosis-ai 0.3.8 (admission + long-poll results under a lease).
FastAPI is imported only when ``create_rollout_server`` is first used; without the
``server`` extra that raises :class:`~osmosis_rollout.errors.MissingExtraError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from osmosis_rollout.server.auth import SERVER_API_KEY_ENV, ControllerAuth
from osmosis_rollout.server.shutdown import DrainPolicy

if TYPE_CHECKING:
    from osmosis_rollout.server.app import configure_rollout_app, create_rollout_server
    from osmosis_rollout.server.limits import DEFAULT_MAX_BODY_BYTES
    from osmosis_rollout.server.runner import run_rollout_app

_LAZY = {
    "create_rollout_server": "app",
    "execute_rollout": "app",
    "DEFAULT_MAX_BODY_BYTES": "limits",
    "configure_rollout_app": "app",
    "run_rollout_app": "runner",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    from osmosis_rollout._internal.imports import require_extra

    require_extra("fastapi", extra="server")
    module = importlib.import_module(f"{__name__}.{module_name}")
    return getattr(module, name)


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "SERVER_API_KEY_ENV",
    "ControllerAuth",
    "DrainPolicy",
    "configure_rollout_app",
    "create_rollout_server",
    "run_rollout_app",
]
