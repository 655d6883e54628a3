"""The plugin's view of a workspace: discovery and user-code import, with ``UsageError``s.

Discovery (:mod:`osmosis_rollout.workspace`) and import (:mod:`osmosis_rollout.user_code`)
live in the runtime; this module only turns what they find, or fail to find, into the
``pytest.UsageError`` a plugin user sees, naming the ``--osmosis-*`` option that fixes it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.errors import EntrypointError
from osmosis_rollout.user_code import load_object
from osmosis_rollout.workspace import eval_config_for, find_workspace, rollout_entrypoints

__all__ = ["default_eval_config", "discover_entrypoint", "find_workspace", "load_callable"]


def discover_entrypoint(workspace: Path | None) -> str:
    """The single ``rollouts/*/main.py``; a clear ``UsageError`` when there are none or several."""
    if workspace is None:
        raise pytest.UsageError(
            "pytest-osmosis: no rollout found: no rollouts/<name>/main.py in this directory or its "
            "parents. Pass --osmosis-rollout path/to/main.py[:ATTR] (or set osmosis_rollout in the ini)."
        )
    found = rollout_entrypoints(workspace)
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
    return eval_config_for(workspace, entrypoint)


def load_callable(reference: str, *, base: Path, what: str) -> Callable[..., Any] | Any:
    """Import ``MODULE_OR_FILE:NAME`` (a file path is loaded from disk, relative to ``base``)."""
    try:
        return load_object(reference, base_dir=base)
    except EntrypointError as exc:
        raise pytest.UsageError(f"{what}: {exc}") from exc
    except Exception as exc:
        target = reference.rpartition(":")[0]
        raise pytest.UsageError(
            f"{what}: cannot import {target!r}: {type(exc).__name__}: {exc}"
        ) from exc
