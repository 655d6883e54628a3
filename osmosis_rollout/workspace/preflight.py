"""The preflight checks: dataset contract, eval/training configs, the rollout entrypoint.

One implementation behind ``osmosis-rollout validate`` and the pytest plugin's
``osmosis-preflight::*`` items; each caller only translates a :class:`CheckResult` into
its own failure (an exit status, a failed item). The rules follow the official
``osmosis eval submit`` / ``train submit`` preflight:

- a config names ``rollouts/<rollout>/<entrypoint>``; a missing path is an error;
- the entrypoint is imported; a ``ModuleNotFoundError`` raised inside it is a warning
  (the dependency may be installed only where the rollout runs), as are requirements of
  ``rollouts/<rollout>/pyproject.toml`` this environment does not satisfy (the import is
  then skipped); any other import error fails the check;
- beyond the official rules, the entrypoint must expose something this package can run: an
  app, a backend, or an ``AgentWorkflow`` (a Grader is optional: ungraded rows report no
  reward).
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import requires as installed_requirements
from importlib.metadata import version as installed_version
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_rollout.errors import ConfigError, EntrypointError
from osmosis_rollout.workspace import ROLLOUTS_DIR, config_workspace

if TYPE_CHECKING:
    from osmosis_rollout.workspace.entrypoint import LoadedRollout
    from osmosis_rollout.workspace.eval_config import ExperimentConfig

__all__ = [
    "CheckResult",
    "check_dataset",
    "check_entrypoint",
    "check_eval_config",
    "check_training_config",
    "config_entrypoint",
    "unsatisfied_requirements",
]


@dataclass(frozen=True)
class CheckResult:
    """One preflight check: what was checked, whether it passed, and the readable detail."""

    name: str
    ok: bool
    detail: str
    warnings: tuple[str, ...] = ()

    def format(self) -> str:
        """``ok    name: detail`` or ``error name: detail`` (continuation lines indented)."""
        label = "ok   " if self.ok else "error"
        lines = [f"{label} {self.name}: {_indent(self.detail)}"]
        lines += [f"      warning: {_indent(warning)}" for warning in self.warnings]
        return "\n".join(lines)


def _indent(text: str) -> str:
    return text.strip().replace("\n", "\n      ")


def _without_source(message: str, source: str) -> str:
    prefix = f"{source}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


# --------------------------------------------------------------------------- dataset


def check_dataset(path: str | Path, *, name: str | None = None) -> CheckResult:
    """The dataset contract; the platform's row minimum is a warning locally."""
    from osmosis_rollout.dataset import validate_dataset

    name = name or f"dataset[{path}]"
    if not Path(path).is_file():
        return CheckResult(name, False, f"file not found: {path}")
    report = validate_dataset(path)
    if not report.ok:  # the report lists each error with its fix, then the warnings
        return CheckResult(name, False, _without_source(report.format(), report.path))
    summary = f"valid {report.mode} dataset, {report.n_rows} row(s)" if report.mode else "ok"
    return CheckResult(name, True, summary, tuple(report.warnings))


# --------------------------------------------------------------------------- configs


def config_entrypoint(config_path: str | Path, experiment: ExperimentConfig) -> Path | None:
    """``<workspace>/rollouts/<rollout>/<entrypoint>`` of a config; ``None`` without a workspace."""
    workspace = config_workspace(Path(config_path))
    if workspace is None:
        return None
    return workspace / ROLLOUTS_DIR / experiment.rollout / experiment.entrypoint


def check_eval_config(
    path: str | Path, *, submit: bool = False, name: str | None = None
) -> CheckResult:
    """The eval TOML and the rollout path it names.

    With ``submit``, ``[secrets]`` is required and the config must sit in a workspace.
    """
    from osmosis_rollout.workspace.eval_config import load_eval_config

    name = name or f"eval-config[{path}]"
    return _check_config(name, path, lambda: load_eval_config(path, require_secrets=submit), submit)


def check_training_config(
    path: str | Path, *, submit: bool = False, name: str | None = None
) -> CheckResult:
    """A training TOML (``[experiment]``, ``[training]``, ``[sampling]``, ``[checkpoints]`` ...)."""
    from osmosis_rollout.workspace.training_config import load_training_config

    name = name or f"training-config[{path}]"
    return _check_config(name, path, lambda: load_training_config(path), submit, kind="training")


def _check_config(
    name: str, path: str | Path, load: Callable[[], Any], submit: bool, kind: str = "eval"
) -> CheckResult:
    """A config that ``load`` reads, and the rollout path it names."""
    try:
        config = load()
    except ConfigError as exc:
        return CheckResult(name, False, _without_source(str(exc), str(path)))
    experiment, where = config.experiment, Path(path)
    warnings = tuple(config.warnings)
    entrypoint = config_entrypoint(where, experiment)
    rollout = f"rollouts/{experiment.rollout}/{experiment.entrypoint}"
    if entrypoint is None:
        message = (
            f"no workspace around {where} (no rollouts/ folder, and the file is not under "
            f"configs/{kind}/), so {rollout} was not checked"
        )
        if submit:
            fix = f"\nfix: keep the config at <workspace>/configs/{kind}/"
            return CheckResult(name, False, message + fix, warnings)
        warnings += (message,)
    elif not entrypoint.is_file():
        detail = (
            f"rollout path {rollout} does not exist ({entrypoint})\nfix: set "
            f"[experiment].rollout to a folder of {entrypoint.parent.parent} and entrypoint "
            "to its main file"
        )
        return CheckResult(name, False, detail, warnings)
    detail = (
        f"rollout {experiment.rollout!r}, entrypoint {experiment.entrypoint!r}, "
        f"model {experiment.model_path!r}, dataset {experiment.dataset!r}"
    )
    return CheckResult(name, True, detail, warnings)


# --------------------------------------------------------------------------- entrypoint


def _requirement_problem(raw: str) -> tuple[str, list[str]] | None:
    """(install target, problems) for one declared requirement this environment lacks."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        requirement = Requirement(raw)
    except InvalidRequirement:
        return None  # a malformed pyproject is the installer's error to report
    if requirement.marker is not None and not requirement.marker.evaluate():
        return None
    extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
    target = f"{requirement.name}{extras}{requirement.specifier}"
    try:
        have = installed_version(requirement.name)
    except PackageNotFoundError:
        return target, [f"{requirement.name} is not installed"]
    if requirement.specifier and not requirement.specifier.contains(have, prereleases=True):
        return target, [f"{requirement.name} {have} does not satisfy {requirement.specifier}"]
    problems: list[str] = []
    parent = canonicalize_name(requirement.name)
    for declared in installed_requirements(requirement.name) or []:
        try:
            child = Requirement(declared)
        except InvalidRequirement:
            continue
        if child.marker is None or not any(
            child.marker.evaluate({"extra": extra}) for extra in requirement.extras
        ):
            continue
        if canonicalize_name(child.name) == parent:
            continue  # an extra that names other extras of the same package
        nested = _requirement_problem(str(child).split(";")[0])
        if nested is not None:
            problems += [f"{target} needs {problem}" for problem in nested[1]]
    return (target, problems) if problems else None


def unsatisfied_requirements(rollout_dir: Path) -> list[tuple[str, str]]:
    """(install target, problem) for each ``rollouts/<name>/pyproject.toml`` dependency
    this Python environment does not satisfy."""
    pyproject = rollout_dir / "pyproject.toml"
    if not pyproject.is_file():
        return []
    try:
        with pyproject.open("rb") as handle:
            declared: Any = tomllib.load(handle).get("project", {}).get("dependencies")
    except (OSError, tomllib.TOMLDecodeError, AttributeError):
        return []
    if not isinstance(declared, list):
        return []
    found: list[tuple[str, str]] = []
    for raw in declared:
        if isinstance(raw, str) and (problem := _requirement_problem(raw)) is not None:
            found += [(problem[0], text) for text in problem[1]]
    return found


def _missing_module(exc: BaseException) -> ModuleNotFoundError | None:
    """The ``ModuleNotFoundError`` behind a failed import, if that is what it was."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ModuleNotFoundError):
            return cause
        cause = cause.__cause__
    return None


def check_entrypoint(
    entrypoint: str, base_dir: Path | None = None, *, name: str | None = None
) -> CheckResult:
    """The entrypoint imports and exposes a rollout: an app, a backend, or a workflow."""
    from osmosis_rollout.workspace.entrypoint import load_entrypoint

    name = name or f"entrypoint[{entrypoint}]"
    base = base_dir or Path.cwd()
    file_path = base / entrypoint.split(":", 1)[0]  # an absolute path stays as it is
    if file_path.suffix == ".py" and file_path.is_file():
        unsatisfied = unsatisfied_requirements(file_path.parent)
        if unsatisfied:
            problems = "\n".join(f"  - {problem}" for _, problem in unsatisfied)
            targets = " ".join(f'"{target}"' for target in dict.fromkeys(t for t, _ in unsatisfied))
            why = (
                f"{file_path.parent / 'pyproject.toml'} declares dependencies this Python "
                f"environment does not satisfy:\n{problems}"
            )
            return _import_skipped(name, why, f"pip install {targets}")
    try:
        loaded = load_entrypoint(entrypoint, base_dir=base)
    except EntrypointError as exc:
        missing = _missing_module(exc)
        if missing is not None:
            why = f"{entrypoint} could not be imported: ModuleNotFoundError: {missing}"
            fix = (
                "install that module into this Python environment (the rollout's own "
                "pyproject.toml should declare it)"
            )
            return _import_skipped(name, why, fix)
        return CheckResult(name, False, str(exc))
    except Exception as exc:  # an import-time failure of user code, whatever it is
        return CheckResult(
            name, False, f"importing {entrypoint} raised {type(exc).__name__}: {exc}"
        )
    if loaded.backend is None:
        return CheckResult(name, False, "exposes no workflow, backend or app")
    return CheckResult(name, True, *_describe_loaded(loaded, entrypoint))


def _import_skipped(name: str, why: str, fix: str) -> CheckResult:
    return CheckResult(
        name, True, "import skipped", (f"{why}\nto check the entrypoint here: {fix}",)
    )


def _describe_loaded(loaded: LoadedRollout, entrypoint: str) -> tuple[str, tuple[str, ...]]:
    """What the entrypoint exposes, and the warning said before any row runs when it has a
    workflow and no Grader (every row then passes with no reward)."""
    workflow = loaded.workflow or getattr(loaded.backend, "workflow_cls", None)
    grader = loaded.grader or getattr(loaded.backend, "grader_cls", None)
    parts = ["app"] if loaded.app is not None else []
    parts.append(type(loaded.backend).__name__)
    if workflow is not None:
        parts.append(f"workflow {workflow.__name__}")
    if grader is not None:
        parts.append(f"grader {grader.__name__}")
    if workflow is None or grader is not None:
        return ", ".join(parts), ()
    parts.append("no grader (rows run ungraded and report no reward)")
    warning = (
        f"{entrypoint} defines no Grader: its rows run ungraded (no reward); with no pass "
        "threshold set they pass (--osmosis-require-grader fails such a run)"
    )
    return ", ".join(parts), (warning,)
