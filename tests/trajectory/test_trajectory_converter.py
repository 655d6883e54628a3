"""Chat messages -> ATIF steps: one test per conversion rule."""

from __future__ import annotations

import copy
import json
from typing import Any

from osmosis_rollout.trajectory import messages_to_steps


def one(message: dict[str, Any]) -> dict[str, Any]:
    (step,) = messages_to_steps([message])
    return step


def call(call_id: Any = "c1", name: Any = "add", arguments: Any = '{"a": 1}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant_calling(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


# --- roles -------------------------------------------------------------------------


def test_basic_conversation_maps_to_sequential_steps() -> None:
    steps = messages_to_steps(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"},
        ]
    )
    assert steps == [
        {"step_id": 1, "source": "system", "message": "be brief"},
        {"step_id": 2, "source": "user", "message": "2+2?"},
        {"step_id": 3, "source": "agent", "message": "4"},
    ]


def test_developer_role_becomes_a_system_step() -> None:
    assert one({"role": "developer", "content": "rules"})["source"] == "system"


def test_unknown_role_is_kept_as_user_with_original_role() -> None:
    step = one({"role": "critic", "content": "meh"})
    assert step["source"] == "user"
    assert step["message"] == "meh"
    assert step["extra"] == {"original_role": "critic"}


def test_message_without_role_or_type_is_kept_as_user_with_empty_original_role() -> None:
    assert one({"content": "orphan"})["extra"] == {"original_role": ""}


def test_non_mapping_messages_are_skipped() -> None:
    steps = messages_to_steps(["junk", None, 3, {"role": "user", "content": "hi"}])  # type: ignore[list-item]
    assert steps == [{"step_id": 1, "source": "user", "message": "hi"}]


def test_none_or_empty_input_yields_no_steps() -> None:
    assert messages_to_steps(None) == []
    assert messages_to_steps([]) == []


def test_input_messages_are_not_mutated() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "q"}]},
        assistant_calling(call()),
        {"role": "tool", "tool_call_id": "c1", "content": "2"},
    ]
    before = copy.deepcopy(messages)
    messages_to_steps(messages)
    assert messages == before


# --- content -------------------------------------------------------------------------


def test_null_content_becomes_an_empty_message() -> None:
    assert one({"role": "assistant", "content": None})["message"] == ""


def test_content_part_flattening_joins_text_parts_with_newlines() -> None:
    parts = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    assert one({"role": "user", "content": parts})["message"] == "first\nsecond"


def test_strands_blocks_and_responses_text_parts_flatten_as_text() -> None:
    strands = [{"text": "from strands"}]
    responses = [{"type": "output_text", "text": "from responses", "annotations": []}]
    assert one({"role": "user", "content": strands})["message"] == "from strands"
    assert one({"role": "assistant", "content": responses})["message"] == "from responses"


def test_non_text_content_is_kept_as_json_text() -> None:
    parts = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:x"}},
    ]
    message = one({"role": "user", "content": parts})["message"]
    assert json.loads(message) == parts


def test_non_ascii_content_is_kept_verbatim_in_json_text() -> None:
    parts = [{"type": "image_url", "image_url": {"url": "é"}}]
    assert "é" in one({"role": "user", "content": parts})["message"]


def test_empty_content_list_becomes_an_empty_message() -> None:
    assert one({"role": "assistant", "content": []})["message"] == ""


# --- tool calls ----------------------------------------------------------------------


def test_tool_calls_convert_with_json_parsed_arguments() -> None:
    step = one(assistant_calling(call("c1", "add", '{"a": 1, "b": [2]}')))
    assert step["source"] == "agent"
    assert step["tool_calls"] == [
        {"tool_call_id": "c1", "function_name": "add", "arguments": {"a": 1, "b": [2]}}
    ]


def test_tool_call_without_id_or_name_gets_positional_defaults() -> None:
    step = one(assistant_calling(call("c0"), call(None, None), call("", "")))
    assert [(c["tool_call_id"], c["function_name"]) for c in step["tool_calls"]] == [
        ("c0", "add"),
        ("call_1", "unknown"),
        ("call_2", "unknown"),
    ]


def test_empty_tool_arguments_become_an_empty_object() -> None:
    for empty in (None, "", "   "):
        assert one(assistant_calling(call(arguments=empty)))["tool_calls"][0]["arguments"] == {}


def test_malformed_tool_call_arguments_are_preserved_raw() -> None:
    step = one(assistant_calling(call(arguments='{"a": 1')))
    assert step["tool_calls"][0]["arguments"] == {"_raw": '{"a": 1'}


def test_non_object_tool_arguments_are_preserved_raw() -> None:
    for text in ("[1, 2]", "3", '"s"', "null"):
        assert one(assistant_calling(call(arguments=text)))["tool_calls"][0]["arguments"] == {
            "_raw": text
        }
    assert one(assistant_calling(call(arguments=[1, 2])))["tool_calls"][0]["arguments"] == {
        "_raw": "[1, 2]"
    }


def test_non_finite_literals_in_tool_arguments_are_preserved_raw() -> None:
    for text in ('{"x": NaN}', '{"x": Infinity}', '{"x": 1e999}'):
        assert one(assistant_calling(call(arguments=text)))["tool_calls"][0]["arguments"] == {
            "_raw": text
        }


def test_mapping_tool_arguments_are_copied_as_objects() -> None:
    arguments = {"a": 1}
    converted = one(assistant_calling(call(arguments=arguments)))["tool_calls"][0]["arguments"]
    assert converted == {"a": 1}
    assert converted is not arguments


def test_flat_tool_calls_without_a_function_object_are_understood() -> None:
    step = one({"role": "assistant", "tool_calls": [{"id": "x", "name": "f", "arguments": "{}"}]})
    assert step["tool_calls"] == [{"tool_call_id": "x", "function_name": "f", "arguments": {}}]


def test_malformed_tool_calls_values_are_ignored() -> None:
    for bad in ("not a list", {"id": "c1"}, 7, [], ["junk", 3]):
        step = one({"role": "assistant", "content": "x", "tool_calls": bad})
        assert "tool_calls" not in step


# --- tool results --------------------------------------------------------------------


def test_tool_results_fold_into_the_preceding_agent_step() -> None:
    steps = messages_to_steps(
        [
            {"role": "user", "content": "go"},
            assistant_calling(call("c1"), call("c2", "mul")),
            {"role": "tool", "tool_call_id": "c1", "content": "3"},
            {"role": "tool", "tool_call_id": "c2", "content": [{"type": "text", "text": "6"}]},
            {"role": "assistant", "content": "done"},
        ]
    )
    assert [s["source"] for s in steps] == ["user", "agent", "agent"]
    assert steps[1]["observation"] == {
        "results": [
            {"source_call_id": "c1", "content": "3"},
            {"source_call_id": "c2", "content": "6"},
        ]
    }
    assert [s["step_id"] for s in steps] == [1, 2, 3]


def test_function_role_results_fold_like_tool_results() -> None:
    steps = messages_to_steps(
        [assistant_calling(call("c1")), {"role": "function", "tool_call_id": "c1", "content": "ok"}]
    )
    assert steps[0]["observation"]["results"] == [{"source_call_id": "c1", "content": "ok"}]


def test_orphan_tool_result_keeps_original_id_in_extra() -> None:
    steps = messages_to_steps(
        [assistant_calling(call("c1")), {"role": "tool", "tool_call_id": "other", "content": "?"}]
    )
    assert steps[0]["observation"]["results"] == [
        {"content": "?", "extra": {"tool_call_id": "other"}}
    ]


def test_tool_result_without_an_id_has_no_source_and_no_extra() -> None:
    steps = messages_to_steps([assistant_calling(call("c1")), {"role": "tool", "content": "?"}])
    assert steps[0]["observation"]["results"] == [{"content": "?"}]


def test_tool_result_without_agent_step_becomes_system_observation() -> None:
    steps = messages_to_steps(
        [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "c9", "content": "late"},
        ]
    )
    assert steps[1] == {
        "step_id": 2,
        "source": "system",
        "message": "",
        "observation": {"results": [{"content": "late", "extra": {"tool_call_id": "c9"}}]},
        "extra": {"original_role": "tool"},
    }


# --- agent-only fields ---------------------------------------------------------------


def test_agent_reasoning_content_is_kept_on_the_step() -> None:
    step = one({"role": "assistant", "content": "a", "reasoning_content": "because"})
    assert step["reasoning_content"] == "because"


def test_non_agent_step_demotes_agent_only_fields_to_extra() -> None:
    step = one({"role": "user", "content": "u", "reasoning_content": "r", "tool_calls": [call()]})
    assert "reasoning_content" not in step
    assert "tool_calls" not in step
    assert step["extra"] == {
        "reasoning_content": "r",
        "tool_calls": [{"tool_call_id": "c1", "function_name": "add", "arguments": {"a": 1}}],
    }


def test_non_string_reasoning_content_is_serialized() -> None:
    step = one({"role": "assistant", "content": "", "reasoning_content": {"steps": [1, "é"]}})
    assert json.loads(step["reasoning_content"]) == {"steps": [1, "é"]}


# --- metrics and model name ----------------------------------------------------------


def test_inline_usage_top_level_shape() -> None:
    usage = {
        "prompt_tokens": 10,
        "completion_tokens": 4,
        "total_tokens": 14,
        "prompt_tokens_details": {"cached_tokens": 3},
        "cost_usd": 0.25,
    }
    step = one({"role": "assistant", "content": "a", "usage": usage})
    assert step["metrics"] == {
        "prompt_tokens": 10,
        "completion_tokens": 4,
        "cached_tokens": 3,
        "cost_usd": 0.25,
        "extra": {"prompt_tokens_details": {"cached_tokens": 3}},
    }
    assert step["llm_call_count"] == 1


def test_inline_usage_responses_api_names() -> None:
    usage = {"input_tokens": 8, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 1}}
    metrics = one({"role": "assistant", "content": "a", "usage": usage})["metrics"]
    assert (metrics["prompt_tokens"], metrics["completion_tokens"], metrics["cached_tokens"]) == (
        8,
        2,
        1,
    )


def test_top_level_cached_tokens_win_over_details() -> None:
    usage = {"prompt_tokens": 1, "cached_tokens": 5, "prompt_tokens_details": {"cached_tokens": 2}}
    assert one({"role": "assistant", "usage": usage})["metrics"]["cached_tokens"] == 5


def test_inline_usage_harbor_extra_response_shape() -> None:
    message = {
        "role": "assistant",
        "content": "a",
        "extra": {"response": {"model": "m-x", "usage": {"prompt_tokens": 5}}},
    }
    step = one(message)
    assert step["metrics"] == {"prompt_tokens": 5}
    assert step["model_name"] == "m-x"


def test_inline_usage_zero_token_counts_are_preserved() -> None:
    usage = {"prompt_tokens": 0, "input_tokens": 9, "completion_tokens": 0, "output_tokens": 9}
    metrics = one({"role": "assistant", "usage": usage})["metrics"]
    assert metrics == {"prompt_tokens": 0, "completion_tokens": 0}


def test_inline_usage_ignored_on_non_agent_steps() -> None:
    step = one({"role": "user", "content": "u", "usage": {"prompt_tokens": 5}, "model": "m"})
    assert "metrics" not in step
    assert "llm_call_count" not in step
    assert "model_name" not in step


def test_malformed_usage_is_ignored_field_by_field() -> None:
    assert "metrics" not in one({"role": "assistant", "usage": "lots"})
    usage = {
        "prompt_tokens": "7",
        "completion_tokens": 3.0,
        "cached_tokens": True,
        "cost_usd": float("nan"),
    }
    assert one({"role": "assistant", "usage": usage})["metrics"] == {"completion_tokens": 3}


def test_model_name_comes_from_model_then_model_name() -> None:
    assert one({"role": "assistant", "model": "a", "model_name": "b"})["model_name"] == "a"
    assert one({"role": "assistant", "model_name": "b"})["model_name"] == "b"
    assert "model_name" not in one({"role": "assistant", "model": ""})


# --- timestamps ----------------------------------------------------------------------


def test_message_timestamps_are_normalized_to_iso_utc() -> None:
    cases = {
        1700000000: "2023-11-14T22:13:20+00:00",
        1700000000.5: "2023-11-14T22:13:20.500000+00:00",
        1700000000500: "2023-11-14T22:13:20.500000+00:00",  # milliseconds
        "2024-01-01T00:00:00Z": "2024-01-01T00:00:00+00:00",
        "2024-01-01T02:00:00+02:00": "2024-01-01T00:00:00+00:00",
        "2024-01-01T00:00:00": "2024-01-01T00:00:00",  # naive: no zone invented
    }
    for raw, expected in cases.items():
        assert one({"role": "user", "created_at": raw})["timestamp"] == expected, raw


def test_timestamp_fields_are_tried_in_order_and_garbage_is_skipped() -> None:
    message = {"role": "user", "created_at": "garbage", "timestamp": True, "completed_at": 0}
    assert one(message)["timestamp"] == "1970-01-01T00:00:00+00:00"
    assert one({"role": "user", "extra": {"timestamp": 86400}})["timestamp"] == (
        "1970-01-02T00:00:00+00:00"
    )
    assert "timestamp" not in one({"role": "user", "created_at": float("inf")})


# --- Responses-API items -------------------------------------------------------------


def test_openai_chat_message_with_type_is_not_misclassified() -> None:
    step = one({"role": "assistant", "type": "function_call", "content": "hello"})
    assert step == {"step_id": 1, "source": "agent", "message": "hello"}


def test_responses_function_call_and_output_fold_into_an_agent_step() -> None:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "weather?"},
        {
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "checking", "annotations": []}],
        },
        {
            "type": "function_call",
            "call_id": "call_w",
            "name": "weather",
            "arguments": '{"city": "Oslo"}',
            "id": "fc_1",
        },
        {"type": "function_call_output", "call_id": "call_w", "output": "rain"},
        {"type": "function_call", "call_id": "call_x", "name": "again", "arguments": ""},
    ]
    steps = messages_to_steps(items)
    assert [s["source"] for s in steps] == ["user", "agent", "agent"]
    assert steps[1]["message"] == "checking"
    assert steps[1]["tool_calls"] == [
        {"tool_call_id": "call_w", "function_name": "weather", "arguments": {"city": "Oslo"}}
    ]
    assert steps[1]["observation"] == {"results": [{"source_call_id": "call_w", "content": "rain"}]}
    # A call after results belongs to the next model turn.
    assert steps[2]["tool_calls"][0]["tool_call_id"] == "call_x"
    assert steps[2]["message"] == ""


def test_responses_reasoning_opens_the_turn_its_message_completes() -> None:
    items: list[dict[str, Any]] = [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        {"type": "function_call", "call_id": "k", "name": "f", "arguments": "{}"},
        {"role": "assistant", "content": "separate turn"},
    ]
    steps = messages_to_steps(items)
    assert len(steps) == 2
    assert steps[0]["reasoning_content"] == "think"
    assert steps[0]["message"] == "a"
    assert steps[0]["tool_calls"][0]["tool_call_id"] == "k"
    assert steps[1]["message"] == "separate turn"


def test_consecutive_chat_assistant_messages_stay_separate_steps() -> None:
    steps = messages_to_steps(
        [
            {"role": "assistant", "content": None, "reasoning_content": "r"},
            {"role": "assistant", "content": "b"},
        ]
    )
    assert len(steps) == 2


def test_unknown_responses_item_is_kept_whole() -> None:
    item = {"type": "web_search_call", "id": "ws_1", "status": "completed"}
    step = one(item)
    assert step["source"] == "user"
    assert json.loads(step["message"]) == item
    assert step["extra"] == {"original_type": "web_search_call"}
