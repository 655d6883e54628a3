"""Configs, outputs, samples and the protocol's wire models."""

from osmosis_rollout.types.config import (
    AgentWorkflowConfig,
    BaseConfig,
    ConcurrencyConfig,
    GraderConfig,
)
from osmosis_rollout.types.output import AgentWorkflowOutput, Messages
from osmosis_rollout.types.protocol import (
    NOTES_HEADER,
    POLLING_LEASE_HEADER,
    CancelRolloutsRequest,
    CancelRolloutsResponse,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutLifecycle,
    RolloutResultResponse,
)
from osmosis_rollout.types.sample import (
    TERMINAL_STATUSES,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    MessageDict,
    RolloutErrorCategory,
    RolloutSample,
    RolloutStatus,
)

__all__ = [
    "NOTES_HEADER",
    "POLLING_LEASE_HEADER",
    "TERMINAL_STATUSES",
    "AgentWorkflowConfig",
    "AgentWorkflowOutput",
    "BaseConfig",
    "CancelRolloutsRequest",
    "CancelRolloutsResponse",
    "ConcurrencyConfig",
    "ExecutionOutcome",
    "ExecutionRequest",
    "ExecutionResult",
    "GraderConfig",
    "MessageDict",
    "Messages",
    "RolloutErrorCategory",
    "RolloutInitRequest",
    "RolloutInitResponse",
    "RolloutLifecycle",
    "RolloutResultResponse",
    "RolloutSample",
    "RolloutStatus",
]
