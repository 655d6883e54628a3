"""Find the pieces of a workspace: the rollout entrypoint, the eval TOML, the policy callable.

A workspace is laid out as the Osmosis templates lay it out::

    rollouts/<name>/main.py      the entrypoint (workflow + grader, or a server app)
    configs/eval/<name>.toml     the eval config
    data/*.jsonl                 datasets
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


def find_workspace(candidates: list[Path]) -> Path | None:
    """The first of ``candidates`` (or their parents) that holds a ``rollouts/`` folder."""
    seen: set[Path] = set()
    for start in candidates:
        for directory in (start, *start.parents):
            if directory in seen:
                continue
            seen.add(directory)
            if (directory / "rollouts").is_dir():
                return directory
    return None


def discover_entrypoint(workspace: Path | None) -> str:
    """The single ``rollouts/*/main.py``; a clear ``UsageError`` when there are none or several."""
    if workspace is None:
        raise pytest.UsageError(
            "pytest-osmosis: no rollout found: no rollouts/<name>/main.py in this directory or its "
            "parents. Pass --osmosis-rollout path/to/main.py[:ATTR] (or set osmosis_rollout in the ini)."
        )
    found = sorted((workspace / "rollouts").glob("*/main.py"))
    if len(found) == 1:
        return str(found[0])
    if not found:
        raise pytest.UsageError(
            f"pytest-osmosis: no rollout found under {workspace / 'rollouts'} (expected rollouts/<name>/main.py). "
            "Pass --osmosis-rollout path/to/main.py[:ATTR]."
        )
    listing = "\n".join(f"  --osmosis-rollout {p.relative_to(workspace)}" for p in found)
    raise pytest.UsageError(
        f"pytest-osmosis: {len(found)} rollouts found under {workspace / 'rollouts'}; choose one:\n{listing}"
    )


def default_eval_config(workspace: Path | None, entrypoint: str) -> Path | None:
    """``configs/eval/<name>.toml`` for ``rollouts/<name>/...``, when it exists."""
    if workspace is None:
        return None
    path = Path(entrypoint.split(":", 1)[0])
    name = path.parent.name if path.suffix == ".py" else None
    if not name:
        return None
    candidate = workspace / "configs" / "eval" / f"{name}.toml"
    return candidate if candidate.is_file() else None


def load_callable(reference: str, *, base: Path, what: str) -> Callable[..., Any] | Any:
    """Import ``MODULE_OR_FILE:NAME`` (a file path is loaded from disk, relative to ``base``)."""
    target, sep, attr = reference.rpartition(":")
    if not sep or not target or not attr:
        raise pytest.UsageError(f"{what}: expected MODULE_OR_FILE:NAME, got {reference!r}")
    path = Path(target)
    if not path.is_absolute():
        path = base / path
    try:
        if target.endswith(".py") or path.is_file():
            if not path.is_file():
                raise pytest.UsageError(f"{what}: file not found: {path}")
            module_name = f"_osmosis_user_{abs(hash(str(path.resolve())))}"
            module = sys.modules.get(module_name)
            if module is None:
                spec = importlib.util.spec_from_file_location(module_name, path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.path.insert(0, str(path.parent))
                sys.modules[module_name] = module
                spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except pytest.UsageError:
        raise
    except Exception as exc:
        raise pytest.UsageError(
            f"{what}: cannot import {target!r}: {type(exc).__name__}: {exc}"
        ) from exc
    try:
        return getattr(module, attr)
    except AttributeError:
        names = sorted(n for n in vars(module) if not n.startswith("_"))
        raise pytest.UsageError(
            f"{what}: {target!r} has no attribute {attr!r}; it defines: {', '.join(names) or '(nothing)'}"
        ) from None
