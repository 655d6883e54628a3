"""Make telemetry maps (``metrics``, ``extra_fields``) encodable as strict JSON.

Foreign numeric scalars (NumPy's) become builtins through the ``numbers`` ABCs, so numpy
is never imported; non-finite numbers, unencodable objects and non-string, non-numeric
keys are dropped rather than costing a rollout its reward.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

_DROP: Any = object()


def _is_plain(value: object) -> bool:
    if value is None or isinstance(value, bool | str) or type(value) is int:
        return True
    return type(value) is float and math.isfinite(value)


def needs_fixing(value: object) -> bool:
    """True when ``json.dumps(value, allow_nan=False)`` could fail or emit foreign types."""
    if isinstance(value, dict):
        return any(not isinstance(k, str) or needs_fixing(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return isinstance(value, tuple) or any(needs_fixing(v) for v in value)
    return not _is_plain(value)


def _key(key: object, dropped: list[str]) -> str | None:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or not isinstance(key, numbers.Real):
        dropped.append(f"key of type {type(key).__name__}")
        return None
    fixed = fit(key, dropped)
    return None if fixed is _DROP else str(fixed)


def fit(value: Any, dropped: list[str]) -> Any:
    """Return a JSON-encodable version of ``value``, or ``_DROP``; reasons go to ``dropped``."""
    if _is_plain(value):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        as_float = float(value)
        if math.isfinite(as_float):
            return as_float
        dropped.append(f"non-finite {type(value).__name__}")
        return _DROP
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = _key(k, dropped)
            if key is None:
                continue
            fixed = fit(v, dropped)
            if fixed is not _DROP:
                out[key] = fixed
        return out
    if isinstance(value, list | tuple):
        return [f for f in (fit(v, dropped) for v in value) if f is not _DROP]
    dropped.append(type(value).__name__)
    return _DROP


def json_safe(value: Any, dropped: list[str]) -> Any:
    """Like :func:`fit` but a dropped top-level value becomes an empty dict."""
    fixed = fit(value, dropped)
    return {} if fixed is _DROP else fixed
