"""Deep copies of JSON-like values (chat messages, dataset rows) without ``copy.deepcopy``'s cost.

``copy.deepcopy`` handles any object: it looks up a copier per value and keeps a memo of
everything it copied. Messages and rows are trees of dicts and lists holding strings and
numbers, copied several times per rollout; walking those types directly is about 3x faster.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

T = TypeVar("T")

_ATOMS = frozenset({str, int, float, bool, type(None)})


class _NotPlain(Exception):
    """A value :func:`_copy_plain` does not copy itself."""


def _copy_plain(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        if not _ATOMS.issuperset(map(type, value)):
            raise _NotPlain  # a key deepcopy would copy (or one JSON has no form for)
        return {k: v if type(v) in _ATOMS else _copy_plain(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else _copy_plain(v) for v in value]
    if kind in _ATOMS:
        return value
    raise _NotPlain


def deep_copy(value: T) -> T:
    """An independent copy of ``value``, as ``copy.deepcopy`` makes it.

    A tree of exactly ``dict``/``list`` of ``str``/``int``/``float``/``bool``/``None`` (keys
    included) is copied directly; anything else (other types, a cycle) goes to
    ``copy.deepcopy`` whole. One difference, invisible to JSON: an object that appears twice
    in a plain tree is copied twice, where ``copy.deepcopy`` would share one copy.
    """
    try:
        copied: T = _copy_plain(value)
    except (_NotPlain, RecursionError):
        return copy.deepcopy(value)
    return copied
