"""ATIF v1.7 trajectory documents for finished rollouts.

``messages_to_steps`` converts chat messages into ATIF steps, ``build_atif`` builds a whole
document, ``format_atif`` serialises it and ``save_trajectory`` writes
``<root>/<rollout_id>/trajectory.json`` (plus ``diagnostics.json``) without ever raising.
Pure: no web framework, no network.
"""

from osmosis_rollout.trajectory.atif import (
    ATIF_PRODUCER_NAME,
    ATIF_SCHEMA_VERSION,
    build_atif,
    format_atif,
    validate_atif,
)
from osmosis_rollout.trajectory.converter import messages_to_steps
from osmosis_rollout.trajectory.save import (
    DIAGNOSTICS_FILENAME,
    TRAJECTORY_FILENAME,
    save_trajectory,
)

__all__ = [
    "ATIF_PRODUCER_NAME",
    "ATIF_SCHEMA_VERSION",
    "DIAGNOSTICS_FILENAME",
    "TRAJECTORY_FILENAME",
    "build_atif",
    "format_atif",
    "messages_to_steps",
    "save_trajectory",
    "validate_atif",
]
