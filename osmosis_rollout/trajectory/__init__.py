"""ATIF v1.7 trajectory documents for finished rollouts.

``messages_to_steps`` converts chat messages into ATIF steps, ``build_atif`` builds a whole
document, ``trajectory_document`` does the same with the official SDK's call shape and
optional per-call metrics (a ``TrajectoryReport``), ``convert_sample_to_trajectory`` returns
that as the pydantic ``Trajectory`` the official SDK returns, ``format_atif`` serialises a
document, ``write_trajectory`` writes ``<root>/<rollout_id>/trajectory.json`` (plus
``diagnostics.json``) without ever raising, and ``save_trajectory`` is its official, awaited
form. Pure: no web framework, no network.
"""

from osmosis_rollout.trajectory.atif import (
    ATIF_PRODUCER_NAME,
    ATIF_SCHEMA_VERSION,
    build_atif,
    format_atif,
    validate_atif,
)
from osmosis_rollout.trajectory.converter import convert_sample_to_trajectory, trajectory_document
from osmosis_rollout.trajectory.models import Trajectory
from osmosis_rollout.trajectory.report import (
    LlmCallMetrics,
    SampleReport,
    TrajectoryReport,
    report_from_response,
)
from osmosis_rollout.trajectory.save import (
    DIAGNOSTICS_FILENAME,
    TRAJECTORY_FILENAME,
    save_trajectory,
    write_trajectory,
)
from osmosis_rollout.trajectory.steps import messages_to_steps

__all__ = [
    "ATIF_PRODUCER_NAME",
    "ATIF_SCHEMA_VERSION",
    "DIAGNOSTICS_FILENAME",
    "TRAJECTORY_FILENAME",
    "LlmCallMetrics",
    "SampleReport",
    "Trajectory",
    "TrajectoryReport",
    "build_atif",
    "convert_sample_to_trajectory",
    "format_atif",
    "messages_to_steps",
    "report_from_response",
    "save_trajectory",
    "trajectory_document",
    "validate_atif",
    "write_trajectory",
]
