"""The controller side: admit rollouts and long-poll their results.

``RolloutClient`` / ``RolloutHandle`` speak the remote-rollout protocol to any rollout server
(ours or the official SDK's): admission lives in ``admission.py``, result polling in
``polling.py``, the client that ties them together in ``client.py``. ``PolicyServer`` (the
rollout-scoped chat-completions endpoint, :mod:`osmosis_rollout.policy.endpoint`) is still
importable from here; it needs FastAPI, so it is imported only when first accessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from osmosis_rollout.controller.client import RolloutClient, RolloutHandle

if TYPE_CHECKING:
    from osmosis_rollout.policy.endpoint import PolicyServer

__all__ = ["PolicyServer", "RolloutClient", "RolloutHandle"]


def __getattr__(name: str) -> Any:
    # Lazy so that importing the controller (and the client) never imports FastAPI.
    if name == "PolicyServer":
        from osmosis_rollout.policy.endpoint import PolicyServer

        return PolicyServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
