"""Once-per-run work is done before the first rollout starts, not inside the first rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows

PREFLIGHT = 2

PROBE_MAIN = """
import sys
from pathlib import Path

from osmosis_rollout import AgentWorkflow, AgentWorkflowContext, Grader, GraderContext


class Probe(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext):
        loaded = "osmosis_rollout.trajectory" in sys.modules
        answer = f"trajectory writer loaded: {loaded}"
        return [*ctx.prompt, {"role": "assistant", "content": answer}]


class Loaded(Grader):
    async def grade(self, ctx: GraderContext):
        ok = ctx.sample.messages[-1]["content"] == "trajectory writer loaded: True"
        ctx.set_reward(1.0 if ok else 0.0)
"""


def test_the_trajectory_writer_is_loaded_before_the_first_row(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(1), main=PROBE_MAIN)
    # A fresh interpreter: the suite's own process has long imported the writer.
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy"
    )
    result.assert_outcomes(passed=1 + PREFLIGHT)
