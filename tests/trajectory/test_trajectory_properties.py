"""Properties over arbitrary input: conversion is total and always yields valid ATIF."""

from __future__ import annotations

import json
from typing import Any

import pytest
from _support.json_values import json_like
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from osmosis_rollout.trajectory import build_atif, format_atif, messages_to_steps, validate_atif
from osmosis_rollout.types import RolloutSample

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
ids = st.one_of(st.none(), st.sampled_from(["c1", "c2", ""]), json_values)
tool_call = st.fixed_dictionaries(
    {},
    optional={
        "id": ids,
        "function": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {},
                optional={
                    "name": json_values,
                    "arguments": st.one_of(
                        json_values, st.sampled_from(['{"a": 1}', "[1]", "{", "", '{"x": NaN}'])
                    ),
                },
            ),
        ),
    },
)
strands_block = st.one_of(
    st.fixed_dictionaries({"text": st.text(max_size=5)}),
    st.fixed_dictionaries(
        {"toolUse": st.fixed_dictionaries({}, optional={"toolUseId": ids, "input": json_values})}
    ),
    st.fixed_dictionaries(
        {
            "toolResult": st.fixed_dictionaries(
                {}, optional={"toolUseId": ids, "status": json_values, "content": json_values}
            )
        }
    ),
    st.fixed_dictionaries({"reasoningContent": json_values}),
)
message = st.fixed_dictionaries(
    {},
    optional={
        "role": st.one_of(
            st.sampled_from(["system", "developer", "user", "assistant", "tool", "function"]),
            json_values,
        ),
        "type": st.sampled_from(
            ["function_call", "function_call_output", "reasoning", "message", "other"]
        ),
        "content": st.one_of(json_values, st.lists(strands_block, max_size=4)),
        "tool_calls": st.one_of(json_values, st.lists(tool_call, max_size=3)),
        "tool_call_id": ids,
        "call_id": ids,
        "name": json_values,
        "arguments": json_values,
        "output": json_values,
        "summary": json_values,
        "reasoning_content": json_values,
        "usage": json_values,
        "model": json_values,
        "created_at": json_values,
        "extra": json_values,
    },
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(st.one_of(message, json_values), max_size=8))
def test_any_message_list_yields_a_valid_document_that_round_trips(messages: list[Any]) -> None:
    sample = RolloutSample(messages=[m for m in messages if isinstance(m, dict)])
    doc = build_atif("r", sample, label="L")
    validate_atif(doc)
    assert json.loads(format_atif(doc)) == doc
    steps = messages_to_steps(messages)
    assert [s["step_id"] for s in steps] == list(range(1, len(steps) + 1))


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_compact_formatting_parses_back_to_the_same_value(value: Any) -> None:
    assert json.loads(format_atif({"v": value})) == {"v": value}


class _Label(str):
    """A str subclass: json encodes it as a string."""


any_json = json_like(
    st.one_of(
        scalars,
        st.text(alphabet=st.characters(codec=None), max_size=8),  # controls, surrogates too
        st.floats(),  # NaN and infinities: json refuses them
        st.integers().map(lambda i: i * 10**30),
        st.builds(_Label, st.text(max_size=4)),
    )
)


@settings(max_examples=300, deadline=None)
@given(any_json)
def test_formatting_is_json_dumps_indented_byte_for_byte(value: Any) -> None:
    doc = {"v": value}
    try:
        expected = json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            format_atif(doc)
        return
    # format_atif then puts each array of numbers on one line: do the same to json's text.
    assert format_atif(doc) == _compact(expected)


def test_deep_and_circular_documents_are_formatted_or_refused_as_json_does() -> None:
    deep: Any = "leaf"
    for _ in range(300):
        deep = {"k": [deep]}
    assert format_atif({"v": deep}) == (
        _compact(json.dumps({"v": deep}, indent=2, ensure_ascii=False, allow_nan=False))
    )
    circular: dict[str, Any] = {}
    circular["self"] = circular
    with pytest.raises(ValueError, match=r"not valid JSON|Circular"):
        format_atif(circular)


def _compact(text: str) -> str:
    from osmosis_rollout.trajectory.atif import _NUMERIC_ARRAY, _compact_array

    return _NUMERIC_ARRAY.sub(_compact_array, text)
