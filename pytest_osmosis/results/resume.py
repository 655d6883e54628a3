"""An honest resume: which journaled rows still stand, and which run again, and why.

Every journaled row carries a fingerprint of what its result depends on: the row's content,
the rollout's files, the policy's module, the environment variables the entrypoint declares
(``OSMOSIS_ENV = ["NAME", ...]``), the pass threshold, the row rule and the attempts.
``--osmosis-resume RUN_DIR`` keeps a journaled row only when its fingerprint is today's, and
runs a row whose rollouts errored again unless ``--osmosis-resume-keep-errors``.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from osmosis_rollout.dataset.rows import bytes_digest
from osmosis_rollout.runs.journal import (
    JOURNAL_FILENAME,
    RunJournalError,
    read_journal,
    read_run_file,
)
from osmosis_rollout.runs.report_model import RowRecord
from osmosis_rollout.workspace.entrypoint import split_reference
from pytest_osmosis.keys import DATASETS_KEY, row_ref

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.options import OsmosisSettings

RESUME_PLUGIN = "osmosis-resume"
ENV_DECLARATION = "OSMOSIS_ENV"
"""The entrypoint's top-level list of the environment variables its rollout reads."""

LOST_WRITE = "lost_write"
"""The fingerprint key of a row journaled after a write of its run failed (the failure)."""

CHANGED = {
    LOST_WRITE: "a file of its run could not be written",
    "entrypoint": "rollout files changed",
    "env": "environment changed",
    "policy": "policy changed",
    "pass_threshold": "pass threshold changed",
    "row_pass": "row rule changed",
    "n": "attempts changed",
    "row": "row content or label changed",
}
"""Each fingerprint key and the reason a row runs again when it differs, run-wide first."""


def reference_file(reference: str, *, base: Path) -> tuple[str, Path | None]:
    """``FILE_OR_MODULE[:ATTR]`` -> (``FILE_OR_MODULE``, its file if one is found)."""
    target = split_reference(reference)[0]
    path = base / Path(target).expanduser()  # an absolute path stays itself
    if path.is_file():
        return target, path
    try:
        origin = getattr(importlib.util.find_spec(target), "origin", None)
    except (ImportError, ValueError):
        origin = None
    if origin and origin not in ("built-in", "frozen") and Path(origin).is_file():
        return target, Path(origin)
    return target, None


def file_digest(reference: str | None, *, base: Path) -> str | None:
    """A short hash of the file behind ``FILE_OR_MODULE[:ATTR]`` (``base`` for a relative
    path), the reference itself when no file is found, None without a reference."""
    if not reference:
        return None
    target, path = reference_file(reference, base=base)
    if path is None:
        return target
    try:
        return f"{target}#{bytes_digest(path.read_bytes())}"
    except OSError:
        return target


def _skipped(name: str) -> bool:
    # Hidden folders (.git, .osmosis runs, .venv) and bytecode are not the rollout's source.
    return name.startswith(".") or name == "__pycache__" or name.endswith((".pyc", ".pyo"))


def rollout_files(
    entrypoint: str | None, *, base: Path, skip: Iterable[Path] = ()
) -> tuple[Path, list[Path]] | None:
    """The rollout's folder (the entrypoint's, or its outermost package's: a module
    ``main.py`` imports counts too) and its files, in a fixed order; None when no entrypoint
    file is found. ``skip``: files and folders left out (the run's output, datasets,
    cassettes)."""
    if not entrypoint:
        return None
    _, path = reference_file(entrypoint, base=base)
    if path is None:
        return None
    folder = path.resolve().parent
    while (folder / "__init__.py").is_file() and (folder.parent / "__init__.py").is_file():
        folder = folder.parent
    skipped = {s.resolve() for s in skip}
    files: list[Path] = []
    for root, dirs, names in os.walk(folder):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if not _skipped(d) and (here / d).resolve() not in skipped)
        files += [
            here / name
            for name in sorted(names)
            if not _skipped(name) and (here / name).resolve() not in skipped
        ]
    return folder, files


def rollout_digest(entrypoint: str | None, *, base: Path, skip: Iterable[Path] = ()) -> str | None:
    """A short hash of every file of the rollout's folder (:func:`rollout_files`); the
    reference itself when no file is found."""
    if not entrypoint:
        return None
    target = reference_file(entrypoint, base=base)[0]
    found = rollout_files(entrypoint, base=base, skip=skip)
    if found is None:
        return target
    folder, files = found
    digest = hashlib.sha256()
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            continue  # unreadable (a dangling link): not part of what the rollout can run
        relative = path.relative_to(folder).as_posix()
        digest.update(relative.encode() + b"\0" + bytes_digest(data).encode())
    return f"{target}#{digest.hexdigest()[:16]}"


def declared_env(entrypoint: str | None, *, base: Path) -> list[str]:
    """The names in the entrypoint's top-level ``OSMOSIS_ENV = [...]`` (read, not imported);
    ``pytest.UsageError`` when it is not a list or tuple of string literals."""
    if not entrypoint:
        return []
    _, path = reference_file(entrypoint, base=base)
    if path is None or path.suffix != ".py":
        return []
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return []  # the syntax check at start-up says what is wrong
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if not any(isinstance(t, ast.Name) and t.id == ENV_DECLARATION for t in targets):
            continue
        try:
            names = ast.literal_eval(value)
        except (ValueError, TypeError):
            names = None
        if isinstance(names, list | tuple) and all(isinstance(name, str) for name in names):
            return list(names)
        raise pytest.UsageError(
            f"{path}:{node.lineno}: {ENV_DECLARATION} must be a list of environment variable "
            f'names written out as strings, e.g. {ENV_DECLARATION} = ["GRADER_MODE"]'
        )
    return []


def env_digest(names: Iterable[str]) -> str | None:
    """A short hash of the values of the environment variables ``names`` (None without
    names): the journal keeps the digest, never a value, which may be a secret."""
    names = sorted(set(names))
    if not names:
        return None
    return bytes_digest(json.dumps({n: os.environ.get(n) for n in names}).encode())


def run_fingerprint(
    *,
    entrypoint: str | None,
    policy: str | None,
    pass_threshold: float,
    row_pass: str,
    n: int,
    base: Path,
    skip: Iterable[Path] = (),
) -> dict[str, Any]:
    """The run-wide part of every row's fingerprint (``policy``: the scripted policy's
    reference, or ``litellm:MODEL``; ``skip``: folders the rollout digest leaves out)."""
    return {
        "entrypoint": rollout_digest(entrypoint, base=base, skip=skip),
        "env": env_digest(declared_env(entrypoint, base=base)),
        "policy": file_digest(policy, base=base)
        if policy and not policy.startswith("litellm:")
        else policy,
        "pass_threshold": pass_threshold,
        "row_pass": row_pass,
        "n": n,
    }


def row_fingerprint(run: Mapping[str, Any], row: DatasetRow) -> dict[str, Any]:
    """A row's fingerprint: the run-wide part and the row's own digest (its label is
    derived from its content)."""
    return {**run, "row": row.digest}


def why_again(
    journaled: RowRecord, fingerprint: Mapping[str, Any] | None, *, keep_errors: bool
) -> str | None:
    """Why a journaled row must run again (None: it stands)."""
    if not keep_errors and journaled.errored():
        return "errored"
    if fingerprint is None:
        return None
    if journaled.fingerprint is None:
        return "journaled without a fingerprint"
    for key, reason in CHANGED.items():
        if journaled.fingerprint.get(key) != fingerprint.get(key):
            return reason
    return None


@dataclass
class ResumePlan:
    """What a resumed run found in the journal: the rows that stand (``kept``: not run again,
    counted in the verdict), the rows run again by reason, and ``previous``: the rows the
    resumed run had selected, then those it journaled."""

    journal: Path
    kept: list[str] = field(default_factory=list)
    ran_again: dict[str, list[str]] = field(default_factory=dict)
    previous: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """What the terminal summary says about the resume."""
        lines = [f"resumed: {len(self.kept)} rows already in {self.journal} were not run again"]
        if self.ran_again:
            reasons = ", ".join(f"{reason} ({len(ids)})" for reason, ids in self.ran_again.items())
            again = sum(len(ids) for ids in self.ran_again.values())
            rows = "1 row" if again == 1 else f"{again} rows"
            lines.append(f"resumed: {rows} ran again: {reasons}")
        return lines

    def describe(self) -> dict[str, Any]:
        """What ``report.json`` and ``run.json`` say under ``resume``."""
        return {
            "journal": str(self.journal),
            "kept": len(self.kept),
            "ran_again": {reason: list(ids) for reason, ids in self.ran_again.items()},
        }


class ResumeHost(Protocol):
    """What a resume needs from the session (:class:`~pytest_osmosis.run.session.OsmosisSession`)."""

    settings: OsmosisSettings
    output: Path
    is_worker: bool

    def fingerprint(self, row: DatasetRow) -> dict[str, Any]:
        """What ``row``'s result depends on."""


class Resume:
    """On ``--osmosis-resume``, leaves out the journaled rows that still stand."""

    def __init__(self, session: ResumeHost) -> None:
        self.session = session
        self.plan: ResumePlan | None = None
        """What the resumed run kept from the journal and runs again (controller only)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Decide the plan over the collected rows; deselect the rows that stand."""
        osmosis = self.session
        if not osmosis.settings.resume or osmosis.is_worker:
            return
        try:
            run = read_run_file(osmosis.output)
            journaled, _ = read_journal(osmosis.output / JOURNAL_FILENAME)
        except RunJournalError as exc:
            raise pytest.UsageError(f"--osmosis-resume: {exc}") from exc
        _refuse_other_datasets(config, osmosis.output, journaled)
        refs = ((item.nodeid, row_ref(item)) for item in items)
        # Today's fingerprint of each collected row (None: not a dataset row, nothing to compare).
        fingerprints = {
            nodeid: osmosis.fingerprint(ref.row) if ref.dataset is not None else None
            for nodeid, ref in refs
            if ref is not None
        }
        self.plan = plan = ResumePlan(osmosis.output / JOURNAL_FILENAME)
        keep_errors = osmosis.settings.resume_keep_errors
        for row in journaled:
            reason = why_again(row, fingerprints.get(row.nodeid), keep_errors=keep_errors)
            if reason is not None and row.nodeid in fingerprints:
                plan.ran_again.setdefault(reason, []).append(row.nodeid)
            else:
                # It stands; so does a row not collected now (-k, --osmosis-rows), as it was.
                plan.kept.append(row.nodeid)
        selected = [nodeid for nodeid in run.get("selected") or [] if isinstance(nodeid, str)]
        plan.previous = list(dict.fromkeys([*selected, *(row.nodeid for row in journaled)]))
        stand = fingerprints.keys() & set(plan.kept)
        if stand:
            config.hook.pytest_deselected(items=[item for item in items if item.nodeid in stand])
            items[:] = [item for item in items if item.nodeid not in stand]


def _refuse_other_datasets(config: pytest.Config, output: Path, journaled: list[RowRecord]) -> None:
    """A journal holding rows of a dataset this run does not read is another run's: its
    rows would count in this run's verdict. ``pytest.UsageError`` naming the dataset."""
    reads = config.stash.get(DATASETS_KEY, set())
    if not reads:
        return  # rows from a marker's datasets: no run-wide dataset to compare with
    base = Path(config.invocation_params.dir)

    def shown(path: Path) -> str:
        return str(path.relative_to(base)) if path.is_relative_to(base) else str(path)

    theirs = sorted({shown(Path(row.dataset)) for row in journaled if row.dataset})
    foreign = [d for d in theirs if (base / d).resolve() not in reads]
    if not foreign:
        return
    ours = ", ".join(sorted(shown(p) for p in reads))
    # Every dataset of that run: given only the foreign ones, a resume refuses the others.
    flags = " ".join(f"--osmosis-dataset={d}" for d in theirs)
    raise pytest.UsageError(
        f"--osmosis-resume {shown(output)}: that run read {', '.join(foreign)}, "
        f"which this run does not read (it reads {ours}): pass {flags} to continue it, or "
        "drop --osmosis-resume for a fresh run"
    )
