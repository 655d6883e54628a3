"""A framework-free rollout: RolloutChatClient runs the tool loop and is the sample source."""

import json

from osmosis_rollout import AgentWorkflow, AgentWorkflowContext, Grader, GraderContext
from osmosis_rollout.chat_client import RolloutChatClient

MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


class MultiplyWorkflow(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext) -> None:
        chat = RolloutChatClient(ctx.prompt, tools=[MULTIPLY], temperature=1.0)
        for _ in range(5):
            reply = await chat.complete()
            if not reply.tool_calls:
                return
            for call in reply.tool_calls:
                args = json.loads(call["function"]["arguments"])
                chat.add_tool_result(call["id"], args["a"] * args["b"])


class MultiplyGrader(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        if ctx.sample is None:
            raise ValueError("workflow produced no sample")
        answer = str(ctx.sample.messages[-1].get("content") or "")
        ctx.set_reward(1.0 if ctx.label and ctx.label.strip() in answer else 0.0)
