"""The ATIF v1.7 document: identity, extra.osmosis, formatting and validation."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

import osmosis_rollout
from osmosis_rollout.trajectory import build_atif, format_atif, validate_atif
from osmosis_rollout.types import RolloutSample

CHAT = [
    {"role": "user", "content": "2+2?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "function": {"name": "add", "arguments": '{"a": 2}'}}],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "4"},
    {"role": "assistant", "content": "4"},
]


def sample(**kwargs: Any) -> RolloutSample:
    kwargs.setdefault("messages", CHAT)
    return RolloutSample(**kwargs)


def test_document_identifies_the_rollout_and_the_producer() -> None:
    doc = build_atif("roll-1", sample())
    assert doc["schema_version"] == "ATIF-v1.7"
    assert doc["session_id"] == doc["trajectory_id"] == "roll-1"
    # 0.3.8 has no controller reports, hence no agent.model_name.
    assert doc["agent"] == {"name": "osmosis-rollout-sdk", "version": osmosis_rollout.__version__}


def test_document_keys_follow_the_atif_order() -> None:
    assert list(build_atif("r", sample())) == [
        "schema_version",
        "session_id",
        "trajectory_id",
        "agent",
        "steps",
        "final_metrics",
        "extra",
    ]


def test_final_metrics_hold_the_step_count_only() -> None:
    doc = build_atif("r", sample())
    assert doc["final_metrics"] == {"total_steps": len(doc["steps"])} == {"total_steps": 3}


def test_extra_carries_platform_context() -> None:
    doc = build_atif(
        "r",
        sample(label="4", reward=1.0, metrics={"turns": 2}, extra_fields={"why": "ok"}),
        label="request-label",
        metadata={"difficulty": "easy"},
        extra_fields={"trace": "t"},
    )
    assert doc["extra"] == {
        "osmosis": {
            "rollout_id": "r",
            "label": "4",
            "reward": 1.0,
            "sample_metrics": {"turns": 2},
            "sample_extra_fields": {"why": "ok"},
            "request_metadata": {"difficulty": "easy"},
            "request_extra_fields": {"trace": "t"},
        }
    }


def test_request_label_used_when_sample_has_none() -> None:
    assert build_atif("r", sample(), label="req")["extra"]["osmosis"]["label"] == "req"


def test_explicit_reward_wins_over_the_sample_reward() -> None:
    assert build_atif("r", sample(reward=0.0), reward=0.5)["extra"]["osmosis"]["reward"] == 0.5
    assert build_atif("r", sample(reward=0.0))["extra"]["osmosis"]["reward"] == 0.0


def test_null_and_empty_osmosis_entries_are_dropped() -> None:
    assert build_atif("r", sample())["extra"] == {"osmosis": {"rollout_id": "r"}}


def test_non_finite_reward_is_rejected() -> None:
    with pytest.raises(ValueError, match="reward must be a finite number"):
        build_atif("r", sample(), reward=float("nan"))


def test_unencodable_sample_metrics_are_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        doc = build_atif("r", sample(metrics={"ok": 1, "bad": float("inf"), "obj": object()}))
    assert doc["extra"]["osmosis"]["sample_metrics"] == {"ok": 1}
    assert "sample_metrics" in caplog.text
    format_atif(doc)


def test_trajectory_messages_are_used_over_native_messages() -> None:
    s = sample(
        messages=[{"role": "user", "content": "native"}],
        trajectory_messages=[{"role": "user", "content": "chat view"}],
    )
    assert [step["message"] for step in build_atif("r", s)["steps"]] == ["chat view"]


def test_native_messages_are_used_when_trajectory_messages_is_none() -> None:
    s = sample(messages=[{"role": "user", "content": "native"}], trajectory_messages=None)
    assert [step["message"] for step in build_atif("r", s)["steps"]] == ["native"]


def test_empty_conversation_gets_one_placeholder_step() -> None:
    for s, reason in ((sample(messages=[]), "no messages"), (None, "no sample")):
        doc = build_atif("r", s)
        assert doc["steps"] == [
            {
                "step_id": 1,
                "source": "system",
                "message": "",
                "extra": {"placeholder": True, "reason": reason},
            }
        ]
        validate_atif(doc)


def test_document_without_sample_still_carries_request_context() -> None:
    doc = build_atif("r", None, label="L", metadata={"m": 1}, reward=0.25)
    assert doc["extra"]["osmosis"] == {
        "rollout_id": "r",
        "label": "L",
        "reward": 0.25,
        "request_metadata": {"m": 1},
    }


# --- formatting ----------------------------------------------------------------------


def test_formatter_pretty_prints_with_compact_numeric_arrays() -> None:
    doc = {"a": [1, -2.5, 3e-05], "b": {"ids": [[1, 2], [3]]}, "c": "x"}
    assert format_atif(doc) == (
        "{\n"
        '  "a": [1, -2.5, 3e-05],\n'
        '  "b": {\n'
        '    "ids": [\n'
        "      [1, 2],\n"
        "      [3]\n"
        "    ]\n"
        "  },\n"
        '  "c": "x"\n'
        "}"
    )


def test_formatter_keeps_non_numeric_arrays_expanded() -> None:
    assert format_atif({"a": [1, "2"]}) == '{\n  "a": [\n    1,\n    "2"\n  ]\n}'
    assert format_atif({"a": [True, None]}) == '{\n  "a": [\n    true,\n    null\n  ]\n}'


def test_formatter_leaves_array_lookalikes_inside_strings_alone() -> None:
    text = "[\n  1,\n  2\n]"
    assert json.loads(format_atif({"s": text}))["s"] == text


def test_formatter_rejects_non_finite_values_in_extra_data() -> None:
    doc = build_atif("r", sample())
    doc["extra"]["osmosis"]["nested"] = {"x": [1.0, float("nan")]}
    with pytest.raises(ValueError, match=r"\$\.extra\.osmosis\.nested\.x\[1\]: non-finite"):
        format_atif(doc)


def test_formatter_rejects_unencodable_objects_naming_the_path() -> None:
    with pytest.raises(TypeError, match=r"\$\.steps\[0\]: object of type set"):
        format_atif({"steps": [set()]})


def test_trajectory_serializes_to_valid_atif_json() -> None:
    doc = build_atif("r", sample(label="4", reward=1.0, metrics={"ids": [1, 2]}))
    text = format_atif(doc)
    assert json.loads(text) == doc
    assert '"ids": [1, 2]' in text
    validate_atif(json.loads(text))


# --- validation ----------------------------------------------------------------------


def test_validate_atif_reports_step_order_and_tool_reference_problems() -> None:
    doc = build_atif("r", sample())
    doc["steps"][0]["step_id"] = 7
    doc["steps"][1]["observation"]["results"][0]["source_call_id"] = "nope"
    with pytest.raises(ValueError) as info:
        validate_atif(doc)
    message = str(info.value)
    assert "steps[0].step_id: expected 1, got 7" in message
    assert "'nope' names no tool call of this step" in message


def test_validate_atif_rejects_agent_only_fields_on_other_steps() -> None:
    doc = build_atif("r", sample())
    doc["steps"][0]["metrics"] = {"prompt_tokens": 1}
    doc["steps"][0]["tool_calls"] = []
    with pytest.raises(ValueError, match=r"steps\[0\]\.metrics: only allowed on agent steps"):
        validate_atif(doc)


def test_validate_atif_rejects_bad_counts_sources_timestamps_and_numbers() -> None:
    doc = build_atif("r", sample())
    doc["final_metrics"]["total_steps"] = 99
    doc["steps"][0]["source"] = "robot"
    doc["steps"][0]["timestamp"] = "yesterday"
    doc["extra"]["osmosis"]["x"] = float("inf")
    with pytest.raises(ValueError) as info:
        validate_atif(doc)
    message = str(info.value)
    for expected in ("total_steps: 99 != 3", "'robot'", "'yesterday'", "non-finite"):
        assert expected in message


def test_validate_atif_requires_at_least_one_step() -> None:
    doc = build_atif("r", sample())
    doc["steps"] = []
    with pytest.raises(ValueError, match="at least one step"):
        validate_atif(doc)
