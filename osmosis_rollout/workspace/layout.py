"""The workspace layout and how to find its parts, shared by the CLI and the pytest plugin.

A workspace is laid out as the official ``osmosis template apply`` lays it out::

    rollouts/<name>/main.py          the entrypoint (workflow + grader, or a server app)
    rollouts/<name>/pyproject.toml   the rollout's own dependencies (installed by the platform)
    configs/eval/<name>.toml         eval config (``osmosis eval submit``)
    configs/training/<name>.toml     training config (``osmosis train submit``)
    data/<dataset>.jsonl             local datasets (``[experiment].dataset`` names one)

Only discovery lives here: nothing is imported or validated (see
:mod:`osmosis_rollout.workspace.preflight` for the checks and :mod:`osmosis_rollout.workspace.user_code` for
imports).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path, PurePosixPath

ROLLOUTS_DIR = "rollouts"
EVAL_CONFIG_DIR = "configs/eval"
TRAINING_CONFIG_DIR = "configs/training"
DATA_DIR = "data"
ENTRYPOINT = "main.py"
#: Dataset file types the readers accept, in the order a bare dataset name is looked up.
DATASET_SUFFIXES = (".jsonl", ".csv", ".parquet")


def find_workspace(candidates: Iterable[Path]) -> Path | None:
    """The first of ``candidates`` (or their parents) that holds a ``rollouts/`` folder."""
    seen: set[Path] = set()
    for start in candidates:
        for directory in (start, *start.parents):
            if directory in seen:
                continue
            seen.add(directory)
            if (directory / ROLLOUTS_DIR).is_dir():
                return directory
    return None


def rollout_entrypoints(workspace: Path) -> list[Path]:
    """The ``rollouts/*/main.py`` files of ``workspace``, sorted."""
    return sorted(Path(workspace).glob(f"{ROLLOUTS_DIR}/*/{ENTRYPOINT}"))


def rollout_name(entrypoint: str | Path) -> str | None:
    """``<name>`` of an entrypoint file ``.../rollouts/<name>/<file>.py[:ATTR]``, else ``None``."""
    path = Path(str(entrypoint).split(":", 1)[0])
    return path.parent.name if path.suffix == ".py" and path.parent.name else None


def eval_config_for(workspace: Path | None, entrypoint: str | Path) -> Path | None:
    """``configs/eval/<name>.toml`` of the rollout at ``entrypoint``, when that file exists."""
    name = rollout_name(entrypoint)
    if workspace is None or name is None:
        return None
    candidate = workspace / EVAL_CONFIG_DIR / f"{name}.toml"
    return candidate if candidate.is_file() else None


def workspace_of_config(config: Path) -> Path:
    """The workspace a ``configs/<kind>/<name>.toml`` belongs to (three levels up)."""
    return config.resolve().parent.parent.parent


def config_workspace(config: Path) -> Path | None:
    """The workspace of a config file: ``<ws>/configs/{eval,training}/x.toml`` gives ``<ws>``;
    a config elsewhere belongs to the nearest folder above it holding ``rollouts/``."""
    resolved = config.resolve()
    if any(resolved.parent.match(d) for d in (EVAL_CONFIG_DIR, TRAINING_CONFIG_DIR)):
        return workspace_of_config(resolved)
    return find_workspace([resolved.parent])


def workspace_files(workspace: Path) -> tuple[list[Path], list[Path], list[Path], list[Path]]:
    """Entrypoints, eval configs, training configs and datasets of ``workspace``, sorted."""
    datasets = sorted(
        path for suffix in DATASET_SUFFIXES for path in workspace.glob(f"{DATA_DIR}/*{suffix}")
    )
    return (
        rollout_entrypoints(workspace),
        sorted(workspace.glob(f"{EVAL_CONFIG_DIR}/*.toml")),
        sorted(workspace.glob(f"{TRAINING_CONFIG_DIR}/*.toml")),
        datasets,
    )


def dataset_candidates(dataset: str, *, workspace: Path, base: Path | None = None) -> list[Path]:
    """Where a local copy of ``[experiment].dataset`` is looked for, in order.

    A value that reads as a file (it has a dataset suffix or a ``/``) is tried relative to
    the workspace, then to ``base``; a bare name (a platform dataset name) is tried as
    ``data/<name>.jsonl``, ``.csv`` and ``.parquet`` in the workspace.
    """
    if PurePosixPath(dataset).suffix in DATASET_SUFFIXES or "/" in dataset or "\\" in dataset:
        as_path = Path(dataset)
        if as_path.is_absolute():
            return [as_path]
        roots = [workspace] + ([base] if base is not None and base != workspace else [])
        return [root / as_path for root in roots]
    return [workspace / DATA_DIR / f"{dataset}{suffix}" for suffix in DATASET_SUFFIXES]


def find_local_dataset(dataset: str, *, workspace: Path, base: Path | None = None) -> Path | None:
    """The first of :func:`dataset_candidates` that exists, else ``None``."""
    candidates = dataset_candidates(dataset, workspace=workspace, base=base)
    return next((candidate for candidate in candidates if candidate.is_file()), None)
