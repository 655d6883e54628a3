"""The official SDK's ``osmosis_ai.rollout.client.client`` path (see :mod:`osmosis_rollout.client`)."""

from osmosis_rollout.controller.client import RolloutClient, RolloutHandle
from osmosis_rollout.errors import RolloutAdmissionTimeoutError, RolloutProtocolError

__all__ = ["RolloutAdmissionTimeoutError", "RolloutClient", "RolloutHandle", "RolloutProtocolError"]
