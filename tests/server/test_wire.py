"""to_wire_result: what a result looks like on the wire."""

from __future__ import annotations

import json
from typing import Any

from pydantic import field_serializer

from osmosis_rollout import ExecutionResult, RolloutResultResponse, RolloutSample, RolloutStatus
from osmosis_rollout.transport.wire import WIRE_SAMPLE_KEYS, strict_json_bytes, to_wire_result


class Opaque:
    """An object with no JSON form."""


class FakeNumpyFloat:
    """Quacks like a numpy scalar: real, but not a builtin float."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        return self.value


def result(status: RolloutStatus = RolloutStatus.SUCCESS, **sample: Any) -> ExecutionResult:
    sample.setdefault("messages", [{"role": "assistant", "content": "hi"}])
    return ExecutionResult(status=status, sample=RolloutSample(**sample))


def test_every_key_is_present_and_trajectory_messages_never_leaves() -> None:
    wire = to_wire_result("r-1", result(reward=1.0, trajectory_messages=[{"role": "x"}]))
    assert set(wire) == {"rollout_id", "status", "sample", "err_message", "err_category"}
    assert tuple(wire["sample"]) == WIRE_SAMPLE_KEYS
    assert "trajectory_messages" not in json.dumps(wire)
    RolloutResultResponse.model_validate(wire)


def test_a_result_without_sample_has_null_sample() -> None:
    wire = to_wire_result(
        "r-1",
        ExecutionResult(status=RolloutStatus.FAILURE, err_message="x", err_category="timeout"),
    )
    assert wire == {
        "rollout_id": "r-1",
        "status": "failure",
        "sample": None,
        "err_message": "x",
        "err_category": "timeout",
    }


def test_reward_is_kept_on_success() -> None:
    assert to_wire_result("r", result(reward=0.25))["sample"]["reward"] == 0.25


def test_failure_does_not_carry_a_reward() -> None:
    wire = to_wire_result("r", result(RolloutStatus.FAILURE, reward=1.0))
    assert wire["sample"]["reward"] is None
    assert wire["sample"]["messages"]  # the failed grade's sample still reaches the wire


def test_removed_sample_does_not_carry_a_reward() -> None:
    wire = to_wire_result("r", result(reward=1.0, remove_sample=True))
    assert wire["sample"]["reward"] is None
    assert wire["sample"]["remove_sample"] is True


def test_non_finite_metrics_are_dropped() -> None:
    sample = RolloutSample(messages=[], reward=1.0)
    sample.metrics["bad"] = float("nan")
    sample.metrics["good"] = 2.0
    wire = to_wire_result("r", ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample))
    assert wire["sample"]["metrics"] == {"good": 2.0}
    strict_json_bytes(wire)


def test_numpy_like_metrics_normalize_instead_of_breaking_the_result() -> None:
    sample = RolloutSample(messages=[], reward=1.0)
    sample.extra_fields["score"] = FakeNumpyFloat(0.5)
    sample.extra_fields["obj"] = Opaque()
    wire = to_wire_result("r", ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample))
    strict_json_bytes(wire)
    assert "obj" not in wire["sample"]["extra_fields"]


def test_nan_inside_messages_becomes_null() -> None:
    wire = to_wire_result("r", result(messages=[{"role": "tool", "score": float("nan")}]))
    assert wire["sample"]["messages"] == [{"role": "tool", "score": None}]


def test_unencodable_message_falls_back_to_a_reward_only_sample() -> None:
    wire = to_wire_result(
        "r",
        result(
            messages=[{"role": "assistant", "content": Opaque()}],
            reward=0.75,
            label="gold\ud800",
            metrics={"m": 1},
        ),
    )
    assert wire["sample"] == {
        "messages": [],
        "label": "gold?",
        "reward": 0.75,
        "remove_sample": False,
        "metrics": {},
        "extra_fields": {},
    }
    strict_json_bytes(wire)


def test_lone_surrogate_in_a_message_falls_back_to_reward_only() -> None:
    wire = to_wire_result("r", result(messages=[{"content": "a\ud800b"}], reward=1.0))
    assert wire["sample"]["messages"] == []
    assert wire["sample"]["reward"] == 1.0


def test_reward_only_fallback_still_nulls_the_reward_of_a_removed_sample() -> None:
    wire = to_wire_result(
        "r", result(messages=[{"content": Opaque()}], reward=1.0, remove_sample=True)
    )
    assert wire["sample"]["remove_sample"] is True
    assert wire["sample"]["reward"] is None


def test_err_message_surrogates_are_replaced() -> None:
    wire = to_wire_result(
        "r", ExecutionResult(status=RolloutStatus.FAILURE, err_message="bad \udcff byte")
    )
    assert wire["err_message"] == "bad ? byte"
    strict_json_bytes(wire)


def test_a_clean_result_round_trips_through_the_wire_model() -> None:
    wire = to_wire_result("r", result(reward=1.0, label="l", metrics={"turns": 2}))
    parsed = RolloutResultResponse.model_validate_json(strict_json_bytes(wire))
    assert parsed.sample is not None and parsed.sample.metrics == {"turns": 2}


def test_a_sample_subclass_is_sent_through_its_own_serializer() -> None:
    class Shouting(RolloutSample):
        @field_serializer("label")
        def _loud(self, label: str | None) -> str | None:
            return label.upper() if label else label

    sample = Shouting(messages=[{"role": "assistant", "content": "hi"}], label="gold")
    wire = to_wire_result("r", ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample))
    assert wire["sample"]["label"] == "GOLD"


def test_a_cyclic_message_falls_back_to_a_reward_only_sample() -> None:
    message: dict[str, Any] = {"role": "assistant", "content": "a"}
    message["self"] = message
    wire = to_wire_result("r", result(messages=[message], reward=1.0))
    assert wire["sample"]["messages"] == [] and wire["sample"]["reward"] == 1.0
    strict_json_bytes(wire)
