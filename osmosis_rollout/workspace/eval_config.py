"""The eval TOML (``configs/eval/*.toml``): load it, check it, coerce it for local runs.

Sections: ``[experiment]`` (required: ``rollout``, ``entrypoint``, ``model_path``,
``dataset``; optional ``branch`` xor ``commit_sha``), ``[evaluation]`` (optional ``limit``,
``n``, ``batch_size``, ``pass_threshold``, ``agent_workflow_timeout_s``,
``grader_timeout_s``), ``[advanced]`` (passed through; unused locally, a warning, except
``price_in``/``price_out``, which price the tokens),
``[env]`` (string values) and ``[secrets]`` (``required = [names]``; needed to submit an
eval, optional for local runs).

The sections are pydantic models with ``extra="forbid"``; their validators raise errors that
carry the fix, and every problem (pydantic's and the ``[env]``/``[secrets]`` name rules) is
reported at once in one :class:`~osmosis_rollout.errors.ConfigError` naming the file, the
key and the fix; an unknown key or section suggests the nearest valid one. The training
TOML (:mod:`osmosis_rollout.workspace.training_config`) reuses these pieces.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath, PurePosixPath, PureWindowsPath
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic import model_validator as _model_validator
from pydantic_core import ErrorDetails, PydanticCustomError

from osmosis_rollout.errors import ConfigError

__all__ = [
    "ENV_NAME_RE",
    "SECRET_NAME_RE",
    "EvalConfig",
    "EvaluationConfig",
    "ExperimentConfig",
    "load_eval_config",
    "parse_eval_config",
    "read_experiment",
]

ENV_NAME_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
SECRET_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
COMMIT_SHA_RE = re.compile(r"^[0-9a-fA-F]{7,40}$")
RESERVED_ENV_PREFIX = "_OSMOSIS_"

_PROBLEM = "osmosis_config"


def _problem(message: str, fix: str | None = None) -> PydanticCustomError:
    """A validation error whose text is ``message`` and whose fix rides in its context."""
    return PydanticCustomError(_PROBLEM, "{message}", {"message": message, "fix": fix})


def _describe(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})"


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


class _Section(BaseModel):
    """A TOML table: unknown keys are errors, values are checked by the validators below."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)


class ExperimentConfig(_Section):
    """``[experiment]``: what to evaluate, with which model, on which dataset."""

    rollout: str
    entrypoint: str
    model_path: str
    dataset: str
    branch: str | None = None
    commit_sha: str | None = None

    @field_validator("rollout", "entrypoint", "model_path", "dataset", mode="before")
    @classmethod
    def _non_empty(cls, value: Any, info: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise _problem(
                f"must be a non-empty string, got {_describe(value)}",
                f'write {info.field_name} = "..."',
            )
        return value

    @field_validator("rollout")
    @classmethod
    def _single_folder(cls, rollout: str) -> str:
        if (
            rollout in (".", "..")
            or "/" in rollout
            or "\\" in rollout
            or not _is_relative_inside(rollout)
        ):
            raise _problem(
                f"must be a single directory name under rollouts/, got {rollout!r}",
                'use the name of a folder in rollouts/, e.g. rollout = "my-rollout"',
            )
        return rollout

    @field_validator("entrypoint")
    @classmethod
    def _inside_rollout(cls, entrypoint: str) -> str:
        if not _is_relative_inside(entrypoint):
            raise _problem(
                f"must be a path inside rollouts/<rollout>/, got {entrypoint!r}",
                'use a path relative to the rollout folder, e.g. entrypoint = "main.py"',
            )
        return entrypoint

    @field_validator("branch", mode="before")
    @classmethod
    def _branch(cls, branch: Any) -> Any:
        if branch is not None and (
            not isinstance(branch, str) or not branch or any(ch.isspace() for ch in branch)
        ):
            raise _problem(
                f"must be a non-empty branch name without whitespace, got {_describe(branch)}",
                'write branch = "my-feature"',
            )
        return branch

    @field_validator("commit_sha", mode="before")
    @classmethod
    def _commit_sha(cls, commit_sha: Any) -> Any:
        if commit_sha is not None and (
            not isinstance(commit_sha, str) or not COMMIT_SHA_RE.fullmatch(commit_sha)
        ):
            raise _problem(
                f"must be a Git commit SHA of 7-40 hex characters, got {_describe(commit_sha)}",
                "copy it from `git rev-parse HEAD`",
            )
        return commit_sha

    @_model_validator(mode="before")
    @classmethod
    def _one_source(cls, table: Any) -> Any:
        if isinstance(table, Mapping) and table.get("branch") and table.get("commit_sha"):
            raise _problem(
                "sets both branch and commit_sha", "keep one of them: a branch or a pinned commit"
            )
        return table


def _integer(value: Any, key: str, minimum: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _problem(f"must be an integer, got {_describe(value)}", f"write {key} = 1")
    if minimum is not None and value < minimum:
        raise _problem(
            f"must be at least {minimum}, got {value}", f"set {key} to {minimum} or more"
        )
    return value


def _number(value: Any, key: str, *, non_negative: bool) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _problem(f"must be a number, got {_describe(value)}", f"write {key} = 1.0")
    if not math.isfinite(value):
        raise _problem(f"must be finite, got {value!r}", f"write a finite number for {key}")
    if non_negative and value < 0:
        raise _problem(
            f"must not be negative, got {value!r}",
            f"use 0 or more, or leave {key} out for no limit",
        )
    return float(value)


class EvaluationConfig(_Section):
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

    @property
    def configured(self) -> frozenset[str]:
        """The keys the file set (absence, not falsiness, picks a default)."""
        return frozenset(self.model_fields_set)

    @field_validator("limit", mode="before")
    @classmethod
    def _limit(cls, value: Any) -> int | None:
        return _integer(value, "limit", None)  # any limit goes: 0 or less keeps every row

    @field_validator("n", "batch_size", mode="before")
    @classmethod
    def _positive(cls, value: Any, info: Any) -> int | None:
        return _integer(value, info.field_name, 1)

    @field_validator("pass_threshold", mode="before")
    @classmethod
    def _threshold(cls, value: Any) -> float | None:
        # Any finite number: rewards may be negative.
        return _number(value, "pass_threshold", non_negative=False)

    @field_validator("agent_workflow_timeout_s", "grader_timeout_s", mode="before")
    @classmethod
    def _timeout(cls, value: Any, info: Any) -> float | None:
        return _number(value, info.field_name, non_negative=True)


class EvalConfig(BaseModel):
    """A checked eval TOML. ``warnings`` holds non-fatal notes for the caller to show."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)

    path: str
    experiment: ExperimentConfig
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    advanced: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    secrets: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def rollout_dir(self, workspace: str | Path) -> Path:
        """``<workspace>/rollouts/<rollout>``."""
        return Path(workspace) / "rollouts" / self.experiment.rollout

    def entrypoint_path(self, workspace: str | Path) -> Path:
        """``<workspace>/rollouts/<rollout>/<entrypoint>``."""
        return self.rollout_dir(workspace) / self.experiment.entrypoint


# --------------------------------------------------------------------------- the file


@dataclass(frozen=True)
class _Issue:
    key: str
    message: str
    fix: str | None = None


class Issues:
    """Problems found in one config file, reported together."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.items: list[_Issue] = []

    def add(self, key: str, message: str, fix: str | None = None) -> None:
        """Record one problem at ``key`` (``section.key`` or a section)."""
        self.items.append(_Issue(key, message, fix))

    def error(self, source: str) -> ConfigError:
        """One :class:`ConfigError` listing every problem, each with its fix."""
        if len(self.items) == 1:
            issue = self.items[0]
            text = f"{source}: {issue.key}: {issue.message}"
            return ConfigError(text + (f"\n  fix: {issue.fix}" if issue.fix else ""))
        lines = [f"{source}: {len(self.items)} problems in this {self.kind} config:"]
        for issue in self.items:
            lines.append(f"  - {issue.key}: {issue.message}")
            if issue.fix:
                lines.append(f"      fix: {issue.fix}")
        return ConfigError("\n".join(lines))


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    match = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f"did you mean {match[0]!r}? " if match else ""


def _add_error(
    issues: Issues,
    detail: ErrorDetails,
    document: type[BaseModel],
    sections: list[str],
    raw: Mapping[str, Any],
) -> None:
    loc = [str(part) for part in detail["loc"]]
    kind = detail["type"]
    ctx = detail.get("ctx") or {}
    if not loc:
        issues.add("config", detail["msg"])
        return
    section = loc[0]
    key = ".".join(loc)
    if len(loc) == 1:
        if kind == "extra_forbidden":
            issues.add(
                section,
                "unknown section",
                f"{_did_you_mean(section, sections)}sections: {', '.join(sections)}",
            )
        elif kind == "missing":
            issues.add(
                section,
                "section is required",
                "add [experiment] with rollout, entrypoint, model_path and dataset",
            )
        elif kind in ("model_type", "dict_type") or not isinstance(raw.get(section), dict):
            issues.add(
                section,
                f"must be a table, got {_describe(raw.get(section))}",
                f"write it as a [{section}] section",
            )
        else:  # a section-wide rule (e.g. branch and commit_sha together)
            issues.add(section, str(ctx.get("message", detail["msg"])), ctx.get("fix"))
        return
    model = document.model_fields[section].annotation
    allowed = (
        list(model.model_fields) if isinstance(model, type) and issubclass(model, BaseModel) else []
    )
    field = loc[1]
    if kind == "extra_forbidden":
        issues.add(
            key, "unknown key", f"{_did_you_mean(field, allowed)}allowed keys: {', '.join(allowed)}"
        )
    elif kind == "missing":
        issues.add(key, "is required", f'add {field} = "..." under [{section}]')
    elif kind == _PROBLEM:
        issues.add(key, str(ctx["message"]), ctx.get("fix"))
    else:
        issues.add(key, f"is invalid: {detail['msg']}")


def check_env(table: Mapping[str, Any], issues: Issues) -> dict[str, str]:
    """``[env]``: upper-case names, none reserved, string values."""
    env: dict[str, str] = {}
    for name, value in table.items():
        found = len(issues.items)
        if not ENV_NAME_RE.fullmatch(name):
            issues.add(
                f"env.{name}",
                "is not a valid variable name (must match ^[A-Z_][A-Z0-9_]*$)",
                "use upper-case letters, digits and underscores",
            )
        elif name.startswith(RESERVED_ENV_PREFIX):
            issues.add(
                f"env.{name}",
                f"names starting with {RESERVED_ENV_PREFIX} are reserved",
                "choose another name",
            )
        if not isinstance(value, str):
            issues.add(
                f"env.{name}",
                f"must be a string, got {_describe(value)}",
                f'quote the value: {name} = "{value}"',
            )
        if len(issues.items) == found:  # no problem with this variable
            env[name] = value
    return env


def check_secrets(
    raw: Mapping[str, Any], env: Mapping[str, str], issues: Issues, *, required: bool
) -> tuple[str, ...]:
    """``[secrets]``: ``required = [NAMES]``, each valid, once, and not also in ``[env]``."""
    if "secrets" not in raw:
        if required:
            issues.add(
                "secrets",
                "section is required to submit an eval",
                'add [secrets] with required = ["OPENAI_API_KEY"] (or required = [])',
            )
        return ()
    table = raw["secrets"]
    if not isinstance(table, dict):
        return ()  # reported as "must be a table" with the other sections
    for key in table:
        if key != "required":
            issues.add(
                f"secrets.{key}",
                "unknown key",
                f"{_did_you_mean(key, ['required'])}allowed keys: required",
            )
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


class _EvalFile(BaseModel):
    """The eval TOML as written: one model per section, nothing else allowed."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid")

    experiment: ExperimentConfig
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    advanced: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, Any] = Field(default_factory=dict)


LOCAL_ADVANCED_KEYS = ("price_in", "price_out")
"""``[advanced]`` keys local runs use: prices in US dollars per million prompt/completion tokens
(``[advanced]`` is where the official CLI keeps keys it records without using)."""


def advanced_warnings(advanced: Mapping[str, Any]) -> tuple[str, ...]:
    """The note that ``[advanced]`` keys are kept but not used locally (prices excepted)."""
    unused = sorted(k for k in advanced if k not in LOCAL_ADVANCED_KEYS)
    if not unused:
        return ()
    return (f"[advanced] keys are recorded but not used by local runs: {', '.join(unused)}",)


def validate_document(
    raw: Mapping[str, Any], model: type[BaseModel], issues: Issues
) -> BaseModel | None:
    """``model`` validated from ``raw``, or ``None`` with its problems added to ``issues``."""
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        sections = list(model.model_fields)
        for detail in exc.errors():
            _add_error(issues, detail, model, sections, raw)
        return None


def check_document(
    raw: Mapping[str, Any], model: type[BaseModel], kind: str, source: str, *, secrets: bool
) -> dict[str, Any]:
    """The sections of a config file as ``model`` reads them, with its checked ``env`` and
    ``secrets`` (``[secrets]`` required when ``secrets``) and the ``warnings``; one
    :class:`ConfigError` naming ``source`` lists every problem."""
    issues = Issues(kind)
    parsed = validate_document(raw, model, issues)
    env_table = raw.get("env")
    env = check_env(env_table if isinstance(env_table, dict) else {}, issues)
    required = check_secrets(raw, env, issues, required=secrets)
    if issues.items or parsed is None:
        raise issues.error(source)
    warnings = advanced_warnings(getattr(parsed, "advanced", {}))
    return {**dict(parsed), "path": source, "env": env, "secrets": required, "warnings": warnings}


def parse_eval_config(
    raw: Mapping[str, Any], *, source: str = "<eval config>", require_secrets: bool = False
) -> EvalConfig:
    """Check an already-parsed TOML document; ``source`` names it in errors."""
    return EvalConfig(**check_document(raw, _EvalFile, "eval", source, secrets=require_secrets))


def read_toml(path: str | Path, kind: str) -> dict[str, Any]:
    """The TOML document at ``path``, or a :class:`ConfigError` naming the file and the fix."""
    source = str(path)
    try:
        with Path(path).open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{source}: {kind} config not found\n  fix: check the path") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{source}: invalid TOML ({exc})\n  fix: correct the syntax at that line"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read the {kind} config ({exc})") from exc


def load_eval_config(path: str | Path, *, require_secrets: bool = False) -> EvalConfig:
    """Read and check an eval TOML file, or raise :class:`ConfigError`.

    ``require_secrets=True`` applies the submit rule that ``[secrets]`` must be present;
    local runs (the pytest plugin) leave it off.
    """
    raw = read_toml(path, "eval")
    return parse_eval_config(raw, source=str(path), require_secrets=require_secrets)


def read_experiment(path: str | Path) -> ExperimentConfig:
    """Only the ``[experiment]`` table of an eval or training TOML (other sections unchecked)."""
    raw = read_toml(path, "eval")
    issues = Issues("eval")
    table = raw.get("experiment")
    document = {"experiment": table} if table is not None else {}
    parsed = validate_document(document, _ExperimentOnly, issues)
    if issues.items or not isinstance(parsed, _ExperimentOnly):
        raise issues.error(str(path))
    return parsed.experiment


class _ExperimentOnly(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(extra="ignore")

    experiment: ExperimentConfig
