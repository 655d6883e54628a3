"""The multiply-openai rollout: an OpenAI Agents SDK agent multiplies two integers with a tool.

The workflow runs the agent on the row's prompt; the session it writes is the rollout's
sample. The grader gives 1.0 when the last number of the final answer is the row's
ground truth. Offline, answered by the deterministic reference policy (no API key), from
the workspace root:

    pytest --osmosis-config configs/eval/multiply-openai.toml --osmosis-dataset data/test.jsonl --osmosis-policy rollouts/multiply-openai/policy.py:policy

Served to the Osmosis controller: ``python rollouts/multiply-openai/main.py`` or
``osmosis-rollout serve rollouts/multiply-openai/main.py``.
"""

from __future__ import annotations

import os
import re

from agents import ModelSettings, Runner, function_tool, set_tracing_disabled

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    Grader,
    GraderContext,
    LocalBackend,
)
from osmosis_rollout.integrations.agents.openai_agents import (
    OsmosisAgent,
    OsmosisMemorySession,
    OsmosisRolloutModel,
)
from osmosis_rollout.sample_text import last_assistant_text
from osmosis_rollout.server import create_rollout_server, run_rollout_app

# The rollout's record is its sample and ATIF trajectory: no traces to the OpenAI dashboard.
set_tracing_disabled(True)


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


class MultiplyWorkflow(AgentWorkflow):
    """Run the multiply agent once on the row's prompt."""

    async def run(self, ctx: AgentWorkflowContext) -> None:
        agent = OsmosisAgent(
            name="multiply-agent",
            instructions="Use the multiply tool when arithmetic is required.",
            model=OsmosisRolloutModel(),
            model_settings=ModelSettings(temperature=1.0, max_tokens=4096),
            tools=[multiply],
        )
        session = OsmosisMemorySession()
        await Runner.run(agent, ctx.prompt, session=session)


class MultiplyGrader(Grader):
    """1.0 when the last number in the final answer equals the label, else 0.0."""

    async def grade(self, ctx: GraderContext) -> None:
        if ctx.sample is None:
            raise ValueError("workflow produced no sample")
        numbers = re.findall(r"-?\d+", last_assistant_text(ctx.sample).replace(",", ""))
        expected = (ctx.label or "").strip()
        ctx.set_reward(1.0 if numbers and numbers[-1] == expected else 0.0)


app = create_rollout_server(backend=LocalBackend(workflow=MultiplyWorkflow, grader=MultiplyGrader))

if __name__ == "__main__":
    # Staged drain on SIGTERM: results in flight stay fetchable until collected.
    run_rollout_app(app, host="0.0.0.0", port=int(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000")))
