"""The workflow contract: one agent run, prompt in, one sample out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Generic

from osmosis_rollout.context import AgentWorkflowContext, TConfig
from osmosis_rollout.types import AgentWorkflowConfig, AgentWorkflowOutput, Messages

# AgentWorkflowConfig is imported here by official-style code, as from the official module.
__all__ = ["AgentWorkflow", "AgentWorkflowConfig", "WorkflowReturn"]


class AgentWorkflow(ABC, Generic[TConfig]):
    """Subclass and implement :meth:`run`.

    ``run`` may be ``async def`` (the norm) or a plain ``def``; a plain one runs in a worker
    thread so blocking code cannot stall the other rollouts, under the same deadline.
    """

    def __init__(self, config: TConfig | None = None) -> None:
        self.config = config

    @abstractmethod
    def run(self, ctx: AgentWorkflowContext[TConfig]) -> Any:
        """Run the agent. Return an ``AgentWorkflowOutput``, a message list, or ``None``.

        ``None`` means the sample comes from the source registered on the active
        ``RolloutContext`` (an ``OsmosisMemorySession``, an ``OsmosisStrandsAgent``, a
        ``RolloutChatClient``).
        """
        raise NotImplementedError


WorkflowReturn = AgentWorkflowOutput | Messages | None
