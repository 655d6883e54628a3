"""Rollout notes: what a rollout logs and its judge says is kept on that rollout, and only there."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    ExecutionRequest,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutContext,
)
from osmosis_rollout.execution import ExecutedRollout, execute_in_process
from osmosis_rollout.rollout_notes import MAX_NOTE_CHARS, RolloutNotes, notes_for, taking_notes
from osmosis_rollout.rubric import evaluate_rubric

log = logging.getLogger("user.rollout")


class Answers(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        log.warning("workflow of %s thinking", ctx.prompt[0]["content"])
        await asyncio.sleep(0.01)  # let the other rollouts interleave
        return [*ctx.prompt, {"role": "assistant", "content": "3"}]


class ChecksFour(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        await asyncio.sleep(0.01)
        log.warning("expected %s, got 3", ctx.label)
        assert ctx.sample is not None
        ctx.sample.metrics["distance"] = 1
        ctx.set_reward(0.0)


class Judged(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        verdict = json.dumps({"score": 0.2, "explanation": f"the final value is not {ctx.label}"})
        result = await evaluate_rubric("Is it right?", "3", policy=[verdict])
        ctx.set_reward(result.score)


def _run_many(grader: type[Grader], labels: list[str]) -> list[ExecutedRollout]:
    backend = LocalBackend(workflow=Answers, grader=grader)

    async def one(label: str) -> ExecutedRollout:
        request = ExecutionRequest(
            id=f"r-{label}", prompt=[{"role": "user", "content": label}], label=label
        )
        return await execute_in_process(backend, request, RolloutContext(rollout_id=request.id))

    async def all_at_once() -> list[ExecutedRollout]:
        with taking_notes():
            return list(await asyncio.gather(*(one(label) for label in labels)))

    return asyncio.run(all_at_once())


def test_each_rollout_keeps_its_own_log_lines_split_by_phase() -> None:
    executed = _run_many(ChecksFour, ["4", "5", "6"])
    for rollout, label in zip(executed, ["4", "5", "6"], strict=True):
        assert rollout.notes is not None
        assert rollout.notes.lines("grader") == [f"WARNING user.rollout: expected {label}, got 3"]
        assert rollout.notes.lines("workflow") == [
            f"WARNING user.rollout: workflow of {label} thinking"
        ]
        assert rollout.result.sample is not None
        assert rollout.result.sample.metrics == {"distance": 1}


def test_a_judges_explanation_is_the_graders_reason_with_no_change_to_the_grader() -> None:
    executed = _run_many(Judged, ["33", "34"])
    reasons = [rollout.notes.grader_reason() for rollout in executed if rollout.notes]
    assert reasons == [
        "judge: score 0.2: the final value is not 33",
        "judge: score 0.2: the final value is not 34",
    ]


def test_records_outside_a_rollout_or_outside_taking_notes_are_not_kept() -> None:
    notes = RolloutNotes()
    log.warning("before any rollout")
    with notes_for(notes, None):
        log.warning("inside, but nobody takes notes")
    with taking_notes():
        log.warning("taking notes, but outside the rollout")
    assert notes.lines("workflow") == [] and notes.lines("grader") == []
    assert not [h for h in logging.getLogger().handlers if type(h).__name__ == "_NotesHandler"]


def test_notes_are_bounded_and_say_how_much_was_left_out() -> None:
    notes = RolloutNotes()
    line = "x" * 1000
    for _ in range(MAX_NOTE_CHARS // 1000 + 5):
        notes.add_line("grader", line)
    kept = notes.lines("grader")
    assert sum(len(kept_line) for kept_line in kept[:-1]) <= MAX_NOTE_CHARS
    assert kept[-1].startswith("... 5 more lines left out")
