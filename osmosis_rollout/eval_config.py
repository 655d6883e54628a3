"""The eval TOML (``configs/eval/*.toml``): load it, check it, coerce it for local runs.

Sections: ``[experiment]`` (required: ``rollout``, ``entrypoint``, ``model_path``,
``dataset``; optional ``branch`` xor ``commit_sha``), ``[evaluation]`` (optional ``limit``,
``n``, ``batch_size``, ``pass_threshold``, ``agent_workflow_timeout_s``,
``grader_timeout_s``), ``[advanced]`` (passed through, unused locally: a warning),
``[env]`` (string values) and ``[secrets]`` (``required = [names]``; needed to submit an
eval, optional for local runs). Unknown sections and keys are errors. Every problem is
reported at once in one :class:`~osmosis_rollout.errors.ConfigError` naming the file, the
key and the fix.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any

from osmosis_rollout.errors import ConfigError

__all__ = [
    "ENV_NAME_RE",
    "SECRET_NAME_RE",
    "EvalConfig",
    "EvaluationConfig",
    "ExperimentConfig",
    "load_eval_config",
    "parse_eval_config",
]

ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
SECRET_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
COMMIT_SHA_RE = re.compile(r"^[0-9a-fA-F]{7,40}$")
RESERVED_ENV_PREFIX = "_OSMOSIS_"

_SECTIONS = ("experiment", "evaluation", "advanced", "env", "secrets")
_EXPERIMENT_REQUIRED = ("rollout", "entrypoint", "model_path", "dataset")
_EXPERIMENT_KEYS = (*_EXPERIMENT_REQUIRED, "branch", "commit_sha")
_EVALUATION_KEYS = (
    "limit",
    "n",
    "batch_size",
    "pass_threshold",
    "agent_workflow_timeout_s",
    "grader_timeout_s",
)


@dataclass(frozen=True)
class ExperimentConfig:
    """``[experiment]``: what to evaluate, with which model, on which dataset."""

    rollout: str
    entrypoint: str
    model_path: str
    dataset: str
    branch: str | None = None
    commit_sha: str | None = None


@dataclass(frozen=True)
class EvaluationConfig:
    """``[evaluation]``, coerced for a local run.

    ``n`` defaults to 1 and ``pass_threshold`` to 1.0 (an explicit 0.0 is kept); the
    timeouts default to ``None`` (unbounded). ``configured`` names the keys the file set.
    """

    limit: int | None = None
    n: int = 1
    batch_size: int | None = None
    pass_threshold: float = 1.0
    agent_workflow_timeout_s: float | None = None
    grader_timeout_s: float | None = None
    configured: frozenset[str] = frozenset()


@dataclass(frozen=True)
class EvalConfig:
    """A checked eval TOML. ``warnings`` holds non-fatal notes for the caller to show."""

    path: str
    experiment: ExperimentConfig
    evaluation: EvaluationConfig = field(default_factory=EvaluationConfig)
    advanced: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def rollout_dir(self, workspace: str | Path) -> Path:
        """``<workspace>/rollouts/<rollout>``."""
        return Path(workspace) / "rollouts" / self.experiment.rollout

    def entrypoint_path(self, workspace: str | Path) -> Path:
        """``<workspace>/rollouts/<rollout>/<entrypoint>``."""
        return self.rollout_dir(workspace) / self.experiment.entrypoint


@dataclass(frozen=True)
class _Issue:
    key: str
    message: str
    fix: str | None = None


class _Issues:
    def __init__(self) -> None:
        self.items: list[_Issue] = []

    def add(self, key: str, message: str, fix: str | None = None) -> None:
        self.items.append(_Issue(key, message, fix))

    def error(self, source: str) -> ConfigError:
        if len(self.items) == 1:
            issue = self.items[0]
            text = f"{source}: {issue.key}: {issue.message}"
            return ConfigError(text + (f"\n  fix: {issue.fix}" if issue.fix else ""))
        lines = [f"{source}: {len(self.items)} problems in this eval config:"]
        for issue in self.items:
            lines.append(f"  - {issue.key}: {issue.message}")
            if issue.fix:
                lines.append(f"      fix: {issue.fix}")
        return ConfigError("\n".join(lines))


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"did you mean {match[0]!r}? " if match else ""


def _unknown_keys(
    table: Mapping[str, Any], allowed: tuple[str, ...], section: str, issues: _Issues
) -> None:
    for key in table:
        if key not in allowed:
            issues.add(
                f"{section}.{key}",
                "unknown key",
                f"{_did_you_mean(key, allowed)}allowed keys: {', '.join(allowed)}",
            )


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


def _table(raw: Mapping[str, Any], name: str, issues: _Issues) -> dict[str, Any] | None:
    value = raw.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        issues.add(
            name, f"must be a table, got {_describe(value)}", f"write it as a [{name}] section"
        )
        return None
    return value


def _is_relative_inside(path_text: str) -> bool:
    """True when ``path_text`` is relative and does not climb out of its base (``..``)."""
    for flavour in (PurePosixPath, PureWindowsPath):
        path: PurePath = flavour(path_text)
        if path.is_absolute() or path.drive or path.root:
            return False
    depth = 0
    for part in PurePosixPath(path_text.replace("\\", "/")).parts:
        depth += -1 if part == ".." else (0 if part == "." else 1)
        if depth < 0:
            return False
    return True


def _experiment(table: dict[str, Any], issues: _Issues) -> ExperimentConfig | None:
    _unknown_keys(table, _EXPERIMENT_KEYS, "experiment", issues)
    values: dict[str, str] = {}
    for key in _EXPERIMENT_REQUIRED:
        value = table.get(key)
        if value is None:
            issues.add(f"experiment.{key}", "is required", f'add {key} = "..." under [experiment]')
        elif not isinstance(value, str) or not value.strip():
            issues.add(
                f"experiment.{key}",
                f"must be a non-empty string, got {_describe(value)}",
                f'write {key} = "..."',
            )
        else:
            values[key] = value
    rollout = values.get("rollout")
    if rollout is not None and (
        rollout in (".", "..")
        or "/" in rollout
        or "\\" in rollout
        or not _is_relative_inside(rollout)
    ):
        issues.add(
            "experiment.rollout",
            f"must be a single directory name under rollouts/, got {rollout!r}",
            'use the name of a folder in rollouts/, e.g. rollout = "my-rollout"',
        )
        values.pop("rollout")
    entrypoint = values.get("entrypoint")
    if entrypoint is not None and not _is_relative_inside(entrypoint):
        issues.add(
            "experiment.entrypoint",
            f"must be a path inside rollouts/<rollout>/, got {entrypoint!r}",
            'use a path relative to the rollout folder, e.g. entrypoint = "main.py"',
        )
        values.pop("entrypoint")

    branch = table.get("branch")
    if branch is not None and (
        not isinstance(branch, str) or not branch or any(ch.isspace() for ch in branch)
    ):
        issues.add(
            "experiment.branch",
            f"must be a non-empty branch name without whitespace, got {_describe(branch)}",
            'write branch = "my-feature"',
        )
        branch = None
    commit_sha = table.get("commit_sha")
    if commit_sha is not None and (
        not isinstance(commit_sha, str) or not COMMIT_SHA_RE.fullmatch(commit_sha)
    ):
        issues.add(
            "experiment.commit_sha",
            f"must be a Git commit SHA of 7-40 hex characters, got {_describe(commit_sha)}",
            "copy it from `git rev-parse HEAD`",
        )
        commit_sha = None
    if table.get("branch") is not None and table.get("commit_sha") is not None:
        issues.add(
            "experiment",
            "sets both branch and commit_sha",
            "keep one of them: a branch or a pinned commit",
        )
    if len(values) < len(_EXPERIMENT_REQUIRED):
        return None
    return ExperimentConfig(
        rollout=values["rollout"],
        entrypoint=values["entrypoint"],
        model_path=values["model_path"],
        dataset=values["dataset"],
        branch=branch if isinstance(branch, str) else None,
        commit_sha=commit_sha if isinstance(commit_sha, str) else None,
    )


def _integer(
    table: Mapping[str, Any], key: str, issues: _Issues, *, minimum: int | None
) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        issues.add(
            f"evaluation.{key}", f"must be an integer, got {_describe(value)}", f"write {key} = 1"
        )
        return None
    if minimum is not None and value < minimum:
        issues.add(
            f"evaluation.{key}",
            f"must be at least {minimum}, got {value}",
            f"set {key} to {minimum} or more",
        )
        return None
    return value


def _number(
    table: Mapping[str, Any], key: str, issues: _Issues, *, non_negative: bool
) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        issues.add(
            f"evaluation.{key}", f"must be a number, got {_describe(value)}", f"write {key} = 1.0"
        )
        return None
    if not math.isfinite(value):
        issues.add(
            f"evaluation.{key}",
            f"must be finite, got {value!r}",
            f"write a finite number for {key}",
        )
        return None
    if non_negative and value < 0:
        issues.add(
            f"evaluation.{key}",
            f"must not be negative, got {value!r}",
            f"use 0 or more, or leave {key} out for no limit",
        )
        return None
    return float(value)


def _evaluation(table: dict[str, Any], issues: _Issues) -> EvaluationConfig:
    _unknown_keys(table, _EVALUATION_KEYS, "evaluation", issues)
    n = _integer(table, "n", issues, minimum=1)
    pass_threshold = _number(table, "pass_threshold", issues, non_negative=False)
    return EvaluationConfig(
        limit=_integer(table, "limit", issues, minimum=None),
        n=1 if n is None else n,
        batch_size=_integer(table, "batch_size", issues, minimum=1),
        # Absence, not falsiness, picks the default: 0.0 means "every graded row passes".
        pass_threshold=1.0 if pass_threshold is None else pass_threshold,
        agent_workflow_timeout_s=_number(
            table, "agent_workflow_timeout_s", issues, non_negative=True
        ),
        grader_timeout_s=_number(table, "grader_timeout_s", issues, non_negative=True),
        configured=frozenset(key for key in table if key in _EVALUATION_KEYS),
    )


def _env(table: dict[str, Any], issues: _Issues) -> dict[str, str]:
    env: dict[str, str] = {}
    for name, value in table.items():
        ok = True
        if not ENV_NAME_RE.fullmatch(name):
            issues.add(
                f"env.{name}",
                "is not a valid variable name (must match ^[A-Z_][A-Z0-9_]*$)",
                "use upper-case letters, digits and underscores",
            )
            ok = False
        elif name.startswith(RESERVED_ENV_PREFIX):
            issues.add(
                f"env.{name}",
                f"names starting with {RESERVED_ENV_PREFIX} are reserved",
                "choose another name",
            )
            ok = False
        if not isinstance(value, str):
            issues.add(
                f"env.{name}",
                f"must be a string, got {_describe(value)}",
                f'quote the value: {name} = "{value}"',
            )
            ok = False
        if ok:
            env[name] = value
    return env


def _secrets(
    raw: Mapping[str, Any], env: Mapping[str, str], issues: _Issues, *, required: bool
) -> tuple[str, ...]:
    if "secrets" not in raw:
        if required:
            issues.add(
                "secrets",
                "section is required to submit an eval",
                'add [secrets] with required = ["OPENAI_API_KEY"] (or required = [])',
            )
        return ()
    table = _table(raw, "secrets", issues)
    if table is None:
        return ()
    _unknown_keys(table, ("required",), "secrets", issues)
    if "required" not in table:
        issues.add(
            "secrets.required", "is missing", 'add required = ["OPENAI_API_KEY"] (or required = [])'
        )
        return ()
    names = table["required"]
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        issues.add(
            "secrets.required",
            f"must be a list of names, got {_describe(names)}",
            'write required = ["OPENAI_API_KEY"]',
        )
        return ()
    seen: set[str] = set()
    for name in names:
        if name in seen:
            issues.add("secrets.required", f"lists {name!r} twice", "name each secret once")
        seen.add(name)
        if not SECRET_NAME_RE.fullmatch(name):
            issues.add(
                "secrets.required",
                f"{name!r} is not a valid secret name (must match ^[A-Z][A-Z0-9_]*$)",
                "use upper-case letters, digits and underscores, starting with a letter",
            )
        if name in env:
            issues.add(
                "secrets.required",
                f"{name!r} is also set in [env]",
                "a variable comes from [env] or from [secrets], not both",
            )
    return tuple(dict.fromkeys(names))


def parse_eval_config(
    raw: Mapping[str, Any], *, source: str = "<eval config>", require_secrets: bool = False
) -> EvalConfig:
    """Check an already-parsed TOML document; ``source`` names it in errors."""
    issues = _Issues()
    for name in raw:
        if name not in _SECTIONS:
            issues.add(
                str(name),
                "unknown section",
                f"{_did_you_mean(str(name), _SECTIONS)}sections: {', '.join(_SECTIONS)}",
            )
    experiment: ExperimentConfig | None = None
    if "experiment" not in raw:
        issues.add(
            "experiment",
            "section is required",
            "add [experiment] with rollout, entrypoint, model_path and dataset",
        )
    elif (table := _table(raw, "experiment", issues)) is not None:
        experiment = _experiment(table, issues)
    evaluation_table = _table(raw, "evaluation", issues)
    evaluation = _evaluation(evaluation_table or {}, issues)
    advanced = _table(raw, "advanced", issues) or {}
    env = _env(_table(raw, "env", issues) or {}, issues)
    secrets = _secrets(raw, env, issues, required=require_secrets)
    if issues.items or experiment is None:
        raise issues.error(source)
    warnings: tuple[str, ...] = ()
    if advanced:
        warnings = (
            f"[advanced] keys are recorded but not used by local runs: {', '.join(sorted(advanced))}",
        )
    return EvalConfig(
        path=source,
        experiment=experiment,
        evaluation=evaluation,
        advanced=dict(advanced),
        env=env,
        secrets=secrets,
        warnings=warnings,
    )


def load_eval_config(path: str | Path, *, require_secrets: bool = False) -> EvalConfig:
    """Read and check an eval TOML file, or raise :class:`ConfigError`.

    ``require_secrets=True`` applies the submit rule that ``[secrets]`` must be present;
    local runs (the pytest plugin) leave it off.
    """
    source = str(path)
    try:
        with Path(path).open("rb") as handle:
            raw = tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{source}: eval config not found\n  fix: check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{source}: invalid TOML ({exc})\n  fix: correct the syntax at that line"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read the eval config ({exc})") from exc
    return parse_eval_config(raw, source=source, require_secrets=require_secrets)
