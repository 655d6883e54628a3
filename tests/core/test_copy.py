"""``deep_copy``: copy.deepcopy's result for messages and rows, sharing nothing mutable."""

from __future__ import annotations

import copy
from typing import Any

from _support.json_values import json_like
from hypothesis import given
from hypothesis import strategies as st

from osmosis_rollout._copy import deep_copy

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
)


def _containers(value: Any) -> list[Any]:
    """Every dict and list inside ``value`` (``value`` included)."""
    if isinstance(value, dict):
        return [value, *(c for item in value.values() for c in _containers(item))]
    if isinstance(value, list | tuple):
        found = [c for item in value for c in _containers(item)]
        return [value, *found] if isinstance(value, list) else found
    return []


@given(json_like(leaves))
def test_a_json_like_value_copies_equal_and_shares_no_container(value: Any) -> None:
    copied = deep_copy(value)
    assert copied == copy.deepcopy(value)
    assert type(copied) is type(value)
    originals = {id(c) for c in _containers(value)}
    assert not originals & {id(c) for c in _containers(copied)}


def test_mutating_the_copy_of_a_message_leaves_the_original_alone() -> None:
    messages = [{"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}]
    copied = deep_copy(messages)
    copied[0]["tool_calls"][0]["id"] = "mutated"
    copied[0]["tool_calls"].append({"id": "2"})
    assert messages == [{"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}]


def test_an_object_in_the_tree_is_copied_by_its_own_deepcopy() -> None:
    class Part:
        def __init__(self, text: str) -> None:
            self.text = text

        def __deepcopy__(self, memo: dict[int, Any]) -> Part:
            return Part(self.text + " (copied)")

    part = Part("hi")
    copied = deep_copy([{"role": "user", "content": [part]}])
    assert copied[0]["content"][0] is not part
    assert copied[0]["content"][0].text == "hi (copied)"


def test_a_tuple_key_is_copied_as_deepcopy_copies_it() -> None:
    value = {("a", 1): [1, 2]}
    copied = deep_copy(value)
    assert copied == value and copied[("a", 1)] is not value[("a", 1)]


def test_a_cycle_is_copied_as_deepcopy_copies_it() -> None:
    cyclic: list[Any] = [{"role": "user", "content": "x"}]
    cyclic.append(cyclic)
    copied = deep_copy(cyclic)
    assert copied is not cyclic
    assert copied[1] is copied
    assert copied[0] == {"role": "user", "content": "x"} and copied[0] is not cyclic[0]
