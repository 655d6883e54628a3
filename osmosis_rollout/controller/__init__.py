"""The controller side: admit rollouts, long-poll their results, serve the policy endpoint.

``RolloutClient`` / ``RolloutHandle`` speak the remote-rollout protocol to any rollout server
(ours or the official SDK's). ``PolicyServer`` serves the rollout-scoped chat-completions
endpoint; it needs FastAPI, so it is imported only when first accessed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from osmosis_rollout.controller.client import RolloutClient, RolloutHandle

if TYPE_CHECKING:
    from osmosis_rollout.controller.policy_server import PolicyServer

__all__ = ["PolicyServer", "RolloutClient", "RolloutHandle"]


def __getattr__(name: str) -> Any:
    # Lazy so that importing the controller (and the client) never imports FastAPI.
    if name == "PolicyServer":
        from osmosis_rollout.controller.policy_server import PolicyServer

        return PolicyServer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
