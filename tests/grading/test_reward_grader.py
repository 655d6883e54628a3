"""A reward function as a Grader in one line, run for real through LocalBackend."""

from __future__ import annotations

from typing import Any

import pytest
from grading_support import SHAPES

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    AgentWorkflowOutput,
    ExecutionRequest,
    GraderContext,
    LocalBackend,
    RolloutErrorCategory,
    RolloutSample,
    RolloutStatus,
)
from osmosis_rollout.rewards import RewardGrader, osmosis_reward, reward_grader
from osmosis_rollout.sample_text import tool_calls

SEEN: list[tuple[str, str, dict[str, Any] | None]] = []


@osmosis_reward
def contains_answer(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
    """1.0 when the reference answer appears in the solution."""
    SEEN.append((solution_str, ground_truth, extra_info))
    return 1.0 if ground_truth in solution_str else 0.0


@pytest.fixture(autouse=True)
def _forget_calls() -> None:
    SEEN.clear()


def _replaying(messages: list[dict[str, Any]]) -> type[AgentWorkflow[Any]]:
    class Replays(AgentWorkflow[Any]):
        async def run(self, ctx: AgentWorkflowContext[Any]) -> AgentWorkflowOutput:
            return AgentWorkflowOutput(messages=messages)

    return Replays


def _request(**overrides: Any) -> ExecutionRequest:
    fields: dict[str, Any] = {
        "id": "r-1",
        "prompt": [{"role": "user", "content": "What is 6 times 7?"}],
        "label": "42",
        "metadata": {"difficulty": "easy"},
    }
    fields.update(overrides)
    return ExecutionRequest(**fields)


@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_as_grader_rewards_the_last_assistant_text_of_every_shape(shape: str) -> None:
    grader = contains_answer.as_grader()
    backend = LocalBackend(workflow=_replaying(SHAPES[shape]), grader=grader)
    result = (await backend.execute(_request())).result
    assert result.status is RolloutStatus.SUCCESS, result.err_message
    assert result.sample is not None
    assert result.sample.reward == 1.0
    solution, ground_truth, extra_info = SEEN[-1]
    assert solution == "6 times 7 is 42."
    assert ground_truth == "42"
    assert extra_info is not None
    assert extra_info["metadata"] == {"difficulty": "easy"}
    assert extra_info["messages"] == SHAPES[shape]


def test_the_grader_class_is_named_for_the_function_and_lives_in_its_module() -> None:
    grader = contains_answer.as_grader()
    assert grader.__name__ == "ContainsAnswerGrader"
    assert grader.__module__ == __name__
    assert issubclass(grader, RewardGrader)
    assert contains_answer.as_grader(name="Judge").__name__ == "Judge"


async def test_solution_picks_which_text_of_the_sample_is_judged() -> None:
    def first_tool_arguments(sample: RolloutSample) -> str:
        calls = tool_calls(sample)
        return str(calls[0]["arguments"]["a"] * calls[0]["arguments"]["b"]) if calls else ""

    grader = reward_grader(contains_answer, solution=first_tool_arguments)
    backend = LocalBackend(workflow=_replaying(SHAPES["strands"]), grader=grader)
    result = (await backend.execute(_request())).result
    assert result.sample is not None and result.sample.reward == 1.0
    assert SEEN[-1][0] == "42"


async def test_reward_grader_accepts_an_undecorated_function_and_checks_it() -> None:
    def plain(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return 0.5

    grader = reward_grader(plain)
    ctx = GraderContext(label="x", sample=RolloutSample(messages=SHAPES["chat"]))
    grader().grade(ctx)
    assert ctx.sample is not None and ctx.sample.reward == 0.5
    with pytest.raises(TypeError, match="parameter 1 is named 'answer'"):
        reward_grader(lambda answer, ground_truth, extra_info=None: 1.0)


async def test_extra_info_can_be_built_from_the_grader_context() -> None:
    grader = contains_answer.as_grader(extra_info=lambda ctx: {"row": (ctx.metadata or {})["id"]})
    backend = LocalBackend(workflow=_replaying(SHAPES["chat"]), grader=grader)
    await backend.execute(_request(metadata={"id": 7}))
    assert SEEN[-1][2] == {"row": 7}


async def test_a_row_without_a_label_passes_an_empty_ground_truth() -> None:
    backend = LocalBackend(workflow=_replaying(SHAPES["chat"]), grader=contains_answer.as_grader())
    result = (await backend.execute(_request(label=None))).result
    assert result.status is RolloutStatus.SUCCESS, result.err_message
    assert SEEN[-1][1] == ""
    assert result.sample is not None and result.sample.reward == 1.0  # "" is in every string


async def test_a_bool_returned_inside_a_grader_fails_the_rollout_as_a_validation_error() -> None:
    @osmosis_reward
    def predicate(solution_str: str, ground_truth: str, extra_info: dict | None = None) -> float:
        return ground_truth in solution_str  # type: ignore[return-value]

    backend = LocalBackend(workflow=_replaying(SHAPES["agents"]), grader=predicate.as_grader())
    result = (await backend.execute(_request())).result
    assert result.status is RolloutStatus.FAILURE
    assert result.err_category is RolloutErrorCategory.VALIDATION_ERROR
    assert result.err_message is not None
    assert "returned the bool True" in result.err_message


async def test_a_solution_picker_returning_a_non_string_is_reported() -> None:
    grader = contains_answer.as_grader(solution=lambda sample: None)  # type: ignore[arg-type,return-value]
    backend = LocalBackend(workflow=_replaying(SHAPES["chat"]), grader=grader)
    result = (await backend.execute(_request())).result
    assert result.status is RolloutStatus.FAILURE
    assert result.err_message is not None
    assert "returned NoneType; it must return the solution text as a str" in result.err_message
