"""A Strands rollout written for the official SDK (``osmosis_ai.rollout`` imports replaced by
``osmosis_rollout``): the placeholder carries ``params={...}``, the prompt goes in as
``messages``, and the grader walks the agent's native content blocks."""

from strands import tool

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    Grader,
    GraderContext,
)
from osmosis_rollout.integrations.agents.strands import (
    OsmosisRolloutModel,
    OsmosisStrandsAgent,
)


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


class MultiplyWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> None:
        agent = OsmosisStrandsAgent(
            model=OsmosisRolloutModel(params={"temperature": 1.0, "max_tokens": 4096}),
            system_prompt="Use the multiply tool when arithmetic is required.",
            tools=[multiply],
            messages=ctx.prompt[:-1],
            callback_handler=None,
        )
        await agent.invoke_async(ctx.prompt[-1]["content"])


def _last_text(sample) -> str:
    for message in reversed(sample.messages):
        if message.get("role") != "assistant":
            continue
        for block in message.get("content") or []:
            if isinstance(block, dict) and block.get("text"):
                return block["text"]
    return ""


class MultiplyGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        if ctx.sample is None:
            raise ValueError("workflow produced no sample")
        answer = _last_text(ctx.sample)
        ctx.set_reward(1.0 if ctx.label and ctx.label.strip() in answer else 0.0)
