"""The judge rollout: an LLM judge grades the answer against a rubric.

The workflow asks the model once (no framework, no tools) to convert a temperature and
show its working. The grader is an LLM-as-judge: :func:`osmosis_rollout.rubric.evaluate_rubric`
sends the rubric, the task, the answer and the reference value to a judge, which replies
with a JSON verdict ``{"score", "explanation"}`` (a malformed reply fails the grading, scores
are clamped to [0, 1]); the score is the reward and the verdict is kept on the sample.

Which judge: set ``JUDGE_MODEL`` to a LiteLLM model id (``openai/gpt-4.1-mini``; its key from
the environment) for a real LLM judge. Unset, the judge is :func:`reference_verdict`, the
rubric applied mechanically: deterministic, offline, no API key, and still sent through the
same verdict parsing as a real judge's reply. Offline, with the reference policy, from the
workspace root:

    pytest --osmosis-config configs/eval/judge.toml --osmosis-dataset data/test.jsonl --osmosis-policy rollouts/judge/policy.py:policy

Served to the Osmosis controller: ``python rollouts/judge/main.py`` or
``osmosis-rollout serve rollouts/judge/main.py``.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    Grader,
    GraderContext,
    LocalBackend,
)
from osmosis_rollout.chat_client import RolloutChatClient
from osmosis_rollout.rubric import evaluate_rubric
from osmosis_rollout.sample_text import first_user_text, last_assistant_text
from osmosis_rollout.server import create_rollout_server, run_rollout_app

JUDGE_MODEL = os.environ.get("JUDGE_MODEL", "").strip() or None
"""LiteLLM id of the judge model; ``None`` uses the deterministic :func:`reference_verdict`."""

RUBRIC = """\
The task is to convert a temperature from Celsius to Fahrenheit.
Score 1.0 when the final value equals the reference answer (within 0.05 degrees) and the
answer shows how it was computed (multiply by 9/5, or 1.8, then add 32).
Score 0.5 when the final value is right but no working is shown.
Score 0.0 when the final value is wrong or missing."""

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def reference_verdict(solution: str, reference: str) -> str:
    """The rubric applied mechanically, as a judge's JSON reply: the offline judge."""
    numbers = _NUMBER.findall(solution.replace(",", ""))
    try:
        correct = bool(numbers) and abs(float(numbers[-1]) - float(reference)) <= 0.05
    except ValueError:
        correct = False
    shows_working = "9/5" in solution or "1.8" in solution
    if not correct:
        score, why = 0.0, f"the final value is not {reference}"
    elif shows_working:
        score, why = 1.0, "correct value, computed with the 9/5 + 32 formula"
    else:
        score, why = 0.5, "correct value, but no working is shown"
    return json.dumps({"score": score, "explanation": why})


class ConversionWorkflow(AgentWorkflow):
    """Ask the model once; the conversation is the rollout's sample."""

    async def run(self, ctx: AgentWorkflowContext) -> None:
        chat = RolloutChatClient(ctx.prompt, temperature=1.0, max_tokens=1024)
        await chat.complete()


class ConversionJudge(Grader):
    """Reward = the judge's rubric score; the verdict is kept as ``extra_fields["judge"]``."""

    async def grade(self, ctx: GraderContext) -> None:
        if ctx.sample is None:
            raise ValueError("workflow produced no sample")
        solution = last_assistant_text(ctx.sample)
        reference = (ctx.label or "").strip()
        judge: dict[str, Any]
        if JUDGE_MODEL:
            judge = {"model": JUDGE_MODEL}
        else:
            judge = {"policy": lambda request: reference_verdict(solution, reference)}
        result = await evaluate_rubric(
            RUBRIC,
            solution,
            reference,
            original_input=first_user_text(ctx.sample) or None,
            **judge,
        )
        ctx.sample.extra_fields["judge"] = {
            "model": JUDGE_MODEL or "reference_verdict",
            "score": result.score,
            "explanation": result.explanation,
            "attempts": result.attempts,
        }
        ctx.set_reward(result.score)


app = create_rollout_server(
    backend=LocalBackend(workflow=ConversionWorkflow, grader=ConversionJudge)
)

if __name__ == "__main__":
    # Staged drain on SIGTERM: results in flight stay fetchable until collected.
    run_rollout_app(app, host="0.0.0.0", port=int(os.environ.get("_OSMOSIS_ROLLOUT_PORT", "8000")))
