"""The official SDK's ``osmosis_ai.rollout.client`` path: the controller-side rollout client.

The implementation lives in :mod:`osmosis_rollout.controller` (``RolloutClient``,
``RolloutHandle``) and :mod:`osmosis_rollout.errors` (the two protocol errors); this package
only gives them the import path migrated code already uses.
"""

from osmosis_rollout.controller.client import RolloutClient, RolloutHandle
from osmosis_rollout.errors import RolloutAdmissionTimeoutError, RolloutProtocolError

__all__ = ["RolloutAdmissionTimeoutError", "RolloutClient", "RolloutHandle", "RolloutProtocolError"]
