"""Indented JSON text: the bytes ``json.dumps(value, indent=2, ...)`` gives, several times faster.

With ``indent`` set, the standard library formats with its pure-Python encoder; the plugin
formats a trajectory per rollout and a report row per row that way. :func:`dumps_indented`
handles trees of plain ``dict`` (string keys), ``list``, ``str``, ``int``, ``float``,
``bool`` and ``None``, using json's own string encoders; anything else (a subclass, a
tuple, another key type, an object, a non-finite number where refused, very deep nesting,
a cycle) raises :class:`NotPlain`, and the caller falls back to ``json.dumps``, which
formats it or raises its usual error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

__all__ = ["NotPlain", "dumps_indented"]

_MAX_DEPTH = 100
_INDENT = "  "


class NotPlain(Exception):
    """``value`` holds something :func:`dumps_indented` leaves to ``json.dumps``."""


def dumps_indented(value: Any, *, ensure_ascii: bool, allow_nan: bool, level: int = 0) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=..., allow_nan=...)``, the same text.

    ``level`` indents every line after the first by that many more levels, as the value
    reads when nested that deep in an indented document. Raises :class:`NotPlain` (see the
    module docstring).
    """
    encode = (
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    )
    out: list[str] = []
    _emit(value, out, "\n" + _INDENT * level, 0, encode, allow_nan)
    return "".join(out)


def _emit(
    value: Any,
    out: list[str],
    newline: str,
    depth: int,
    encode: Callable[[str], str],
    allow_nan: bool,
) -> None:
    kind = type(value)
    if kind is str:
        out.append(encode(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        if depth >= _MAX_DEPTH:
            raise NotPlain
        inner = newline + _INDENT
        separator = "{" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise NotPlain
            out.append(separator)
            out.append(encode(key))
            out.append(": ")
            _emit(item, out, inner, depth + 1, encode, allow_nan)
            separator = "," + inner
        out.append(newline + "}")
    elif kind is list:
        if not value:
            out.append("[]")
            return
        if depth >= _MAX_DEPTH:
            raise NotPlain
        inner = newline + _INDENT
        separator = "[" + inner
        for item in value:
            out.append(separator)
            _emit(item, out, inner, depth + 1, encode, allow_nan)
            separator = "," + inner
        out.append(newline + "]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is float:
        out.append(_float(value, allow_nan))
    else:
        raise NotPlain


def _float(value: float, allow_nan: bool) -> str:
    if math.isfinite(value):
        return float.__repr__(value)
    if not allow_nan:
        raise NotPlain  # json.dumps raises its ValueError
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
