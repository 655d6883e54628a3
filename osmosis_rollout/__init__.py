"""osmosis_rollout: write, run and serve Osmosis agent rollouts.

A drop-in for ``osmosis_ai.rollout`` (same module paths and names). This package never
imports pytest, and nothing imported here pulls in openai-agents, strands, litellm,
fastapi or pyarrow: those load where they are used.
"""

from osmosis_rollout.agent_workflow import AgentWorkflow
from osmosis_rollout.backend import ExecutionBackend, LocalBackend
from osmosis_rollout.context import (
    AgentWorkflowContext,
    GraderContext,
    RolloutContext,
    SampleSource,
    get_rollout_context,
)
from osmosis_rollout.grader import Grader
from osmosis_rollout.types import (
    POLLING_LEASE_HEADER,
    AgentWorkflowConfig,
    AgentWorkflowOutput,
    BaseConfig,
    CancelRolloutsRequest,
    CancelRolloutsResponse,
    ConcurrencyConfig,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    GraderConfig,
    MessageDict,
    Messages,
    RolloutErrorCategory,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutLifecycle,
    RolloutResultResponse,
    RolloutSample,
    RolloutStatus,
)

__version__ = "0.1.0"

__all__ = [
    "POLLING_LEASE_HEADER",
    "AgentWorkflow",
    "AgentWorkflowConfig",
    "AgentWorkflowContext",
    "AgentWorkflowOutput",
    "BaseConfig",
    "CancelRolloutsRequest",
    "CancelRolloutsResponse",
    "ConcurrencyConfig",
    "ExecutionBackend",
    "ExecutionOutcome",
    "ExecutionRequest",
    "ExecutionResult",
    "Grader",
    "GraderConfig",
    "GraderContext",
    "LocalBackend",
    "MessageDict",
    "Messages",
    "RolloutContext",
    "RolloutErrorCategory",
    "RolloutInitRequest",
    "RolloutInitResponse",
    "RolloutLifecycle",
    "RolloutResultResponse",
    "RolloutSample",
    "RolloutStatus",
    "SampleSource",
    "__version__",
    "get_rollout_context",
]
