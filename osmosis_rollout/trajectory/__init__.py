"""ATIF v1.7 trajectory documents for finished rollouts: build them from a sample's messages
(``build_atif``, ``trajectory_document``, the official ``convert_sample_to_trajectory``) and
write them (``write_trajectory`` never raises; ``save_trajectory`` is its official, awaited
form). Pure: no web framework, no network.
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
