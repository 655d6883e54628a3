"""Former home of the policy endpoint; it lives in :mod:`osmosis_rollout.policy.endpoint`.

Kept so that ``from osmosis_rollout.controller.policy_server import PolicyServer`` (and the
other names) keep working. Importing it needs the ``server`` extra, as before.
"""

from osmosis_rollout.policy.endpoint import (
    CallRecord,
    Faults,
    PolicyServer,
    RolloutCallLog,
    create_policy_router,
)

__all__ = ["CallRecord", "Faults", "PolicyServer", "RolloutCallLog", "create_policy_router"]
