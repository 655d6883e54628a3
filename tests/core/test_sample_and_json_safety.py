"""Reward validation, the trajectory snapshot, graded-sample checks and JSON-safe copies."""

from __future__ import annotations

import fractions
import json
import logging
import math
from typing import Any

import pytest
from pydantic import ValidationError

from osmosis_rollout import GraderContext, RolloutSample
from osmosis_rollout.backend.local import validate_graded_sample

MESSAGES = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
NON_FINITE = [math.nan, math.inf, -math.inf]


@pytest.mark.parametrize("reward", NON_FINITE)
def test_construction_rejects_a_non_finite_reward(reward: float) -> None:
    with pytest.raises(ValidationError, match="reward"):
        RolloutSample(messages=MESSAGES, reward=reward)


@pytest.mark.parametrize("reward", NON_FINITE)
def test_assignment_rejects_a_non_finite_reward(reward: float) -> None:
    sample = RolloutSample(messages=MESSAGES)
    with pytest.raises(ValidationError, match="reward"):
        sample.reward = reward
    assert sample.reward is None


@pytest.mark.parametrize("reward", ["high", object(), [1.0]])
def test_assignment_rejects_a_non_numeric_reward(reward: Any) -> None:
    sample = RolloutSample(messages=MESSAGES)
    with pytest.raises(ValidationError, match="reward"):
        sample.reward = reward


@pytest.mark.parametrize("reward", [0, 1, -2.5, 0.125, 1e6])
def test_finite_rewards_are_accepted_as_floats(reward: float) -> None:
    sample = RolloutSample(messages=MESSAGES, reward=reward)
    assert sample.reward == reward and isinstance(sample.reward, float)
    sample.reward = reward
    assert sample.reward == reward


def test_none_means_not_graded_and_stays_allowed() -> None:
    sample = RolloutSample(messages=MESSAGES, reward=1.0)
    sample.reward = None
    assert sample.reward is None


def test_set_reward_rejects_a_non_finite_reward_naming_the_value() -> None:
    ctx = GraderContext(sample=RolloutSample(messages=MESSAGES))
    # A pydantic ValidationError, as the official SDK raises (tests/interop compares them).
    with pytest.raises(ValidationError, match=r"^the grader set reward=nan; a reward must be a"):
        ctx.set_reward(math.nan)
    assert ctx.sample is not None and ctx.sample.reward is None


def test_set_reward_sets_the_sample_reward() -> None:
    ctx = GraderContext(label="a", sample=RolloutSample(messages=MESSAGES))
    ctx.set_reward(0.5)
    assert ctx.sample is not None and ctx.sample.reward == 0.5


def test_set_reward_without_a_sample_raises_value_error() -> None:
    with pytest.raises(ValueError, match="no sample"):
        GraderContext(label="a").set_reward(1.0)


def test_trajectory_messages_default_to_a_deep_copy_of_messages() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "content": "a", "tool_calls": [{"id": "1"}]}
    ]
    sample = RolloutSample(messages=messages)
    assert sample.trajectory_messages == messages
    messages[0]["tool_calls"][0]["id"] = "mutated"
    snapshot: Any = sample.trajectory_messages
    assert snapshot[0]["tool_calls"][0]["id"] == "1"


def test_an_explicit_none_trajectory_disables_persistence() -> None:
    assert RolloutSample(messages=MESSAGES, trajectory_messages=None).trajectory_messages is None


def test_an_uncopyable_message_leaves_the_trajectory_off(caplog: pytest.LogCaptureFixture) -> None:
    class NoCopy:
        def __deepcopy__(self, memo: object) -> Any:
            raise RuntimeError("cannot copy")

    with caplog.at_level(logging.WARNING):
        sample = RolloutSample(messages=[{"role": "user", "content": NoCopy()}])
    assert sample.trajectory_messages is None
    assert "trajectory" in caplog.text


def test_validation_raises_when_there_is_no_sample() -> None:
    with pytest.raises(ValueError, match="No sample to grade"):
        validate_graded_sample(None)


def test_validation_raises_when_the_sample_has_no_reward() -> None:
    with pytest.raises(ValueError, match="Sample has no reward after grading"):
        validate_graded_sample(RolloutSample(messages=MESSAGES))


def test_validation_accepts_a_sample_with_a_reward() -> None:
    validate_graded_sample(RolloutSample(messages=MESSAGES, reward=0.0))


def test_validation_accepts_a_removed_sample_without_a_reward() -> None:
    validate_graded_sample(RolloutSample(messages=MESSAGES, remove_sample=True))


def _strict_json(sample: RolloutSample) -> str:
    return json.dumps(sample.model_dump(mode="python"), allow_nan=False)


def test_plain_json_dumps_would_otherwise_emit_invalid_json() -> None:
    sample = RolloutSample(messages=MESSAGES, metrics={"loss": math.nan})
    assert "NaN" in json.dumps(sample.metrics)
    with pytest.raises(ValueError):
        _strict_json(sample)
    _strict_json(sample.json_safe_copy())


def test_metrics_mutated_in_place_after_construction_are_still_sanitized() -> None:
    sample = RolloutSample(messages=MESSAGES, metrics={"loss": 0.5})
    sample.metrics["loss"] = math.inf
    sample.metrics["steps"] = 3
    assert sample.json_safe_copy().metrics == {"steps": 3}


def test_nested_values_are_sanitized() -> None:
    sample = RolloutSample(
        messages=MESSAGES,
        extra_fields={"per_turn": [1.0, math.nan, {"x": math.inf, "y": (1, 2)}], "ok": "yes"},
    )
    fixed = sample.json_safe_copy()
    assert fixed.extra_fields == {"per_turn": [1.0, {"y": [1, 2]}], "ok": "yes"}


def test_a_clean_sample_is_returned_as_the_same_object() -> None:
    sample = RolloutSample(
        messages=MESSAGES, metrics={"a": 1, "b": 2.5, "c": None}, extra_fields={"d": [True, "s"]}
    )
    assert sample.json_safe_copy() is sample


def test_sanitizing_leaves_the_original_sample_untouched() -> None:
    sample = RolloutSample(messages=MESSAGES, metrics={"bad": math.nan, "good": 1.0})
    fixed = sample.json_safe_copy()
    assert fixed is not sample
    assert math.isnan(sample.metrics["bad"])
    assert fixed.metrics == {"good": 1.0}


def test_builtin_non_float_values_are_preserved() -> None:
    sample = RolloutSample(
        messages=MESSAGES,
        metrics={"count": 7, "flag": True, "name": "run", "none": None, "bad": math.nan},
    )
    fixed = sample.json_safe_copy().metrics
    assert fixed == {"count": 7, "flag": True, "name": "run", "none": None}
    assert type(fixed["count"]) is int and type(fixed["flag"]) is bool


def test_foreign_numeric_scalars_become_builtins() -> None:
    class MyFloat(float):
        pass

    sample = RolloutSample(
        messages=MESSAGES,
        metrics={
            "fraction": fractions.Fraction(1, 4),
            "subclass": MyFloat(2.5),
        },
    )
    fixed = sample.json_safe_copy().metrics
    assert fixed == {"fraction": 0.25, "subclass": 2.5}
    assert type(fixed["fraction"]) is float and type(fixed["subclass"]) is float


def test_non_finite_foreign_scalars_are_dropped() -> None:
    class MyFloat(float):
        pass

    sample = RolloutSample(messages=MESSAGES, metrics={"x": MyFloat("nan"), "y": MyFloat(1.0)})
    assert sample.json_safe_copy().metrics == {"y": 1.0}


def test_unencodable_objects_and_keys_are_dropped_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sample = RolloutSample(messages=MESSAGES)
    # Pydantic checks top-level keys at construction; in-place mutation bypasses that.
    extra: dict[Any, Any] = sample.extra_fields
    extra.update(
        {
            "obj": object(),
            ("tuple", "key"): 1,
            None: 2,
            True: 3,
            4: "numeric key",
            2.5: "float key",
            "kept": {"inner": {1, 2}, 7: "nested numeric key"},
        }
    )
    with caplog.at_level(logging.WARNING):
        fixed = sample.json_safe_copy()
    assert fixed.extra_fields == {
        "4": "numeric key",
        "2.5": "float key",
        "kept": {"7": "nested numeric key"},
    }
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "object" in warnings[0].getMessage() and "set" in warnings[0].getMessage()


def test_messages_are_not_scanned_by_the_json_safe_copy() -> None:
    sample = RolloutSample(messages=[{"role": "user", "content": "x", "score": math.nan}])
    assert sample.json_safe_copy() is sample


def test_real_numpy_scalars_become_builtins_when_numpy_is_installed() -> None:
    np = pytest.importorskip("numpy")
    sample = RolloutSample(
        messages=MESSAGES,
        metrics={
            "f": np.float32(0.5),
            "i": np.int64(3),
            "nan": np.float64("nan"),
            "arr_item": np.float64(1.25),
        },
    )
    # A grader fills metrics in place (validation sees only the constructor's str keys).
    sample.metrics[np.int32(7)] = "numpy key"
    fixed = sample.json_safe_copy().metrics
    assert fixed == {"f": 0.5, "i": 3, "arr_item": 1.25, "7": "numpy key"}
    assert type(fixed["f"]) is float and type(fixed["i"]) is int
    json.dumps(fixed, allow_nan=False)
