"""A hypothesis strategy for values a JSON writer may be given, odd ones included."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_like(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Trees of ``leaves`` in lists, tuples (json writes them as lists) and dicts, some with
    keys json converts (ints, bools, None): what :func:`json.dumps` accepts."""
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(st.text(max_size=5), inner, max_size=4),
            st.dictionaries(
                st.one_of(st.integers(0, 3), st.booleans(), st.none()), inner, max_size=2
            ),
        ),
        max_leaves=20,
    )
