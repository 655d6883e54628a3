"""Resolve ``"module:Attr"`` references and import optional extras with a clear error."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from osmosis_rollout.errors import missing_extra


def resolve_reference(value: Any) -> Any:
    """Return ``value`` unchanged unless it is a ``"module:Attr"`` string, which is imported.

    As the official SDK's: a string without the ``module:Attr`` shape is a ``ValueError``,
    a module or attribute that cannot be imported an ``ImportError``.
    """
    if not isinstance(value, str):
        return value
    module_name, sep, attr = value.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected 'module:Attr', got {value!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ImportError(
            f"cannot import module {module_name!r} from {value!r}: {exc}", name=exc.name
        ) from exc
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as exc:
            raise ImportError(
                f"module {module_name!r} has no attribute {attr!r}", name=module_name
            ) from exc
    return obj


def require_extra(module: str, *, extra: str, package: str | None = None) -> ModuleType:
    """Import ``module`` or raise :class:`MissingExtraError` naming ``pip install`` of ``extra``.

    The error's ``name`` is the module that was not found (``exc.name``, else ``module``'s
    top-level package), as the official SDK's ``ModuleNotFoundError`` has it.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise missing_extra(extra, package or top, module=exc.name or top) from exc
