"""osmosis_rollout: write, run and serve Osmosis agent rollouts.

A drop-in for ``osmosis_ai.rollout`` (same module paths and names, except the Harbor backend
and the official SDK's internals: tests/core/test_official_name_parity.py lists them) and for
``osmosis_ai``'s rubric API (``evaluate_rubric``, ``RubricResult`` and its errors). This package never
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
from osmosis_rollout.errors import MissingAPIKeyError, ModelNotFoundError, ProviderRequestError
from osmosis_rollout.grader import Grader
from osmosis_rollout.rewards import RewardFunction, RewardGrader, osmosis_reward, reward_grader
from osmosis_rollout.rubric import (
    RubricGrader,
    RubricResult,
    evaluate_rubric,
    evaluate_rubric_sync,
    osmosis_rubric,
    rubric_grader,
)
from osmosis_rollout.sample_text import (
    assistant_texts,
    first_user_text,
    last_assistant_text,
    tool_calls,
)
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
    "MissingAPIKeyError",
    "ModelNotFoundError",
    "ProviderRequestError",
    "RewardFunction",
    "RewardGrader",
    "RolloutContext",
    "RolloutErrorCategory",
    "RolloutInitRequest",
    "RolloutInitResponse",
    "RolloutLifecycle",
    "RolloutResultResponse",
    "RolloutSample",
    "RolloutStatus",
    "RubricGrader",
    "RubricResult",
    "SampleSource",
    "__version__",
    "assistant_texts",
    "evaluate_rubric",
    "evaluate_rubric_sync",
    "first_user_text",
    "get_rollout_context",
    "last_assistant_text",
    "osmosis_reward",
    "osmosis_rubric",
    "reward_grader",
    "rubric_grader",
    "tool_calls",
]
