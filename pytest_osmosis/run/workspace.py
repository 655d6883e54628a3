"""The plugin's view of a workspace: discovery and user-code import (both in
:mod:`osmosis_rollout.workspace`), failing with the ``pytest.UsageError`` a plugin user sees,
naming the ``--osmosis-*`` option that fixes it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.errors import ConfigError, EntrypointError
from osmosis_rollout.workspace import (
    config_workspace,
    dataset_candidates,
    eval_config_for,
    find_local_dataset,
    rollout_entrypoints,
)
from osmosis_rollout.workspace import find_workspace as find_workspace  # re-exported
from osmosis_rollout.workspace.user_code import load_object


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


def dataset_from_eval_config(config: pytest.Config) -> list[str]:
    """With ``--osmosis-config`` and no ``--osmosis-dataset``: the local copy of the platform
    dataset its ``[experiment].dataset`` names (``data/<dataset>.jsonl|.csv|.parquet`` in its
    workspace, or a path), as a one-element list; none is a ``UsageError`` saying what was
    looked for, unless the user named test paths of their own."""
    from osmosis_rollout.workspace.eval_config import read_experiment
    from pytest_osmosis.options import raw_value, resolve_path

    value = raw_value(config, "config")
    if not value:
        return []
    path = resolve_path(config, str(value))
    if not path.is_file():
        raise pytest.UsageError(f"--osmosis-config: file not found: {path}")
    try:
        dataset = read_experiment(path).dataset
    except ConfigError as exc:
        raise pytest.UsageError(f"pytest-osmosis: {exc}") from exc
    invocation = Path(config.invocation_params.dir)
    workspace = config_workspace(path) or invocation
    found = find_local_dataset(dataset, workspace=workspace, base=invocation)
    if found is not None:
        return [str(found)]
    if config.args_source == pytest.Config.ArgsSource.ARGS:
        return []
    candidates = dataset_candidates(dataset, workspace=workspace, base=invocation)
    looked = ", ".join(shown_path(c, workspace) for c in candidates)
    raise pytest.UsageError(
        f"pytest-osmosis: --osmosis-config {value}: [experiment].dataset = {dataset!r} has no "
        f"local file (looked for {looked} in {workspace}).\n"
        "A platform dataset is fetched by the official CLI when it submits "
        f"(`osmosis eval submit {value}`); this plugin runs local files.\n"
        "Fix: pass the rows with --osmosis-dataset path/to/rows.jsonl, or save them as "
        f"data/{dataset}.jsonl in the workspace."
    )


def shown_path(path: Path, base: Path) -> str:
    """``path`` as the user would type it from ``base``: relative when under it."""
    try:
        return str(path.relative_to(base))
    except ValueError:
        return str(path)


def file_not_found(flag: str, path: Path, base: Path, suffixes: tuple[str, ...]) -> str:
    """The message for a missing file: the near name when there is one, else what is there
    (a misspelled folder on the way, ``rollouts/dmeo/main.py``, is corrected too)."""
    import difflib

    message = f"{flag}: file not found: {shown_path(path, base)}"
    folder = path.parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    if folder != path.parent:
        missing = path.relative_to(folder).parts
        no_folder = f"there is no folder {shown_path(path.parent, base)}"
        folders = sorted(p.name for p in folder.iterdir() if p.is_dir())
        for close in difflib.get_close_matches(missing[0], folders, n=3, cutoff=0.6):
            candidate = folder.joinpath(close, *missing[1:])
            if candidate.is_file():
                return f"{message} ({no_folder}); did you mean {shown_path(candidate, base)}?"
        return f"{message} ({no_folder}; the nearest that exists is {shown_path(folder, base)})"
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    near = difflib.get_close_matches(path.name, names, n=3, cutoff=0.5)
    present = [n for n in names if n.endswith(suffixes)][:3]
    where = shown_path(folder, base)
    if near:
        return f"{message}; did you mean {' or '.join(shown_path(folder / n, base) for n in near)}?"
    if present:
        return f"{message}; {where} has {', '.join(present)}"
    return f"{message}; {where} has no {' or '.join(suffixes)} file"


def check_reference_file(flag: str, reference: str, base: Path) -> None:
    """A ``FILE.py[:ATTR]`` reference whose file is missing is a ``UsageError`` with the near
    name; a module reference is left to the import, which says what is missing."""
    target = reference.rpartition(":")[0] if ":" in reference else reference
    if not target.endswith(".py"):
        return
    path = Path(target).expanduser()
    path = path if path.is_absolute() else base / path
    if not path.is_file():
        raise pytest.UsageError(file_not_found(flag, path, base, (".py",)))
