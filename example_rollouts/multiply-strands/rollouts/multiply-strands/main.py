"""The multiply-strands rollout: a Strands agent multiplies two integers with a tool.

The workflow runs the agent on the row's prompt; the agent's messages are the rollout's
sample. The grader is a reward function (``@osmosis_reward``) turned into a Grader: 1.0
when the last number of the final answer is the row's ground truth. Offline, answered by
the deterministic reference policy (no API key), from the workspace root:

    pytest --osmosis-config configs/eval/multiply-strands.toml --osmosis-dataset data/test.jsonl --osmosis-policy rollouts/multiply-strands/policy.py:policy

Served to the Osmosis controller: ``python rollouts/multiply-strands/main.py`` or
``osmosis-rollout serve rollouts/multiply-strands/main.py``.
"""

from __future__ import annotations

import os
import re

from strands import tool

from osmosis_rollout import AgentWorkflow, AgentWorkflowContext, LocalBackend
from osmosis_rollout.integrations.agents.strands import OsmosisRolloutModel, OsmosisStrandsAgent
from osmosis_rollout.rewards import osmosis_reward
from osmosis_rollout.server import create_rollout_server, run_rollout_app

SYSTEM_PROMPT = "Use the multiply tool when arithmetic is required."


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


class MultiplyWorkflow(AgentWorkflow):
    """Run the multiply agent once on the row's prompt."""

    async def run(self, ctx: AgentWorkflowContext) -> None:
        # Strands takes the system prompt apart from the conversation.
        system = [m["content"] for m in ctx.prompt if m.get("role") == "system"]
        history = [m for m in ctx.prompt[:-1] if m.get("role") != "system"]
        agent = OsmosisStrandsAgent(
            model=OsmosisRolloutModel(params={"temperature": 1.0, "max_tokens": 4096}),
            messages=history,
            tools=[multiply],
            system_prompt="\n\n".join(system) or SYSTEM_PROMPT,
            callback_handler=None,
        )
        await agent.invoke_async(ctx.prompt[-1]["content"])


@osmosis_reward
def product_matches(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """1.0 when the last number in the answer equals the ground truth, else 0.0."""
    numbers = re.findall(r"-?\d+", solution_str.replace(",", ""))
    return 1.0 if numbers and numbers[-1] == ground_truth.strip() else 0.0


# The solution is the last assistant text of the Strands messages (the default).
MultiplyGrader = product_matches.as_grader(name="MultiplyGrader")

app = create_rollout_server(backend=LocalBackend(workflow=MultiplyWorkflow, grader=MultiplyGrader))

if __name__ == "__main__":
    # Staged drain on SIGTERM: results in flight stay fetchable until collected.
    run_rollout_app(app, host="0.0.0.0", port=int(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000")))
