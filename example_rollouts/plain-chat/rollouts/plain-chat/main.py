"""The plain-chat rollout: no agent framework, just the chat endpoint and a tool loop.

:class:`~osmosis_rollout.chat_client.RolloutChatClient` sends the conversation to the
rollout's chat-completions endpoint and records it as the rollout's sample. The workflow
runs the tools the model asks for until it answers in text. The grader gives 1.0 when the
model used the multiply tool and the last number of its answer is the row's ground truth.
Offline, answered by the deterministic reference policy (no API key), from the workspace
root:

    pytest --osmosis-config configs/eval/plain-chat.toml --osmosis-dataset data/test.jsonl --osmosis-policy rollouts/plain-chat/policy.py:policy

Served to the Osmosis controller: ``python rollouts/plain-chat/main.py`` or
``osmosis-rollout serve rollouts/plain-chat/main.py``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    Grader,
    GraderContext,
    LocalBackend,
)
from osmosis_rollout.chat_client import RolloutChatClient
from osmosis_rollout.sample_text import last_assistant_text, tool_calls
from osmosis_rollout.server import create_rollout_server, run_rollout_app

MAX_TURNS = 8


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


TOOLS: dict[str, Callable[..., Any]] = {"multiply": multiply}
TOOL_SPECS = [
    {
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
]


def call_tool(name: str, arguments: str) -> str:
    """Run one tool call; a mistake goes back to the model as the tool's result."""
    tool = TOOLS.get(name)
    if tool is None:
        return f"error: unknown tool {name!r}; available: {', '.join(TOOLS)}"
    try:
        return str(tool(**json.loads(arguments or "{}")))
    except (TypeError, ValueError) as exc:
        return f"error: {type(exc).__name__}: {exc}"


class MultiplyWorkflow(AgentWorkflow):
    """Chat with the policy, running its tool calls, until it answers in text."""

    async def run(self, ctx: AgentWorkflowContext) -> None:
        chat = RolloutChatClient(ctx.prompt, tools=TOOL_SPECS, temperature=1.0, max_tokens=4096)
        for _ in range(MAX_TURNS):
            reply = await chat.complete()
            if not reply.tool_calls:
                return
            for call in reply.tool_calls:
                function = call["function"]
                chat.add_tool_result(call["id"], call_tool(function["name"], function["arguments"]))


class MultiplyGrader(Grader):
    """1.0 when multiply was called and the answer's last number equals the label."""

    async def grade(self, ctx: GraderContext) -> None:
        if ctx.sample is None:
            raise ValueError("workflow produced no sample")
        used_tool = any(call["name"] == "multiply" for call in tool_calls(ctx.sample))
        numbers = re.findall(r"-?\d+", last_assistant_text(ctx.sample).replace(",", ""))
        correct = bool(numbers) and numbers[-1] == (ctx.label or "").strip()
        ctx.set_reward(1.0 if used_tool and correct else 0.0)


app = create_rollout_server(backend=LocalBackend(workflow=MultiplyWorkflow, grader=MultiplyGrader))

if __name__ == "__main__":
    # Staged drain on SIGTERM: results in flight stay fetchable until collected.
    run_rollout_app(app, host="0.0.0.0", port=int(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000")))
