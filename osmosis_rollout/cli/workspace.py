"""Workspace commands: ``templates``, ``init`` and ``validate``.

- ``osmosis-rollout templates`` lists the starter rollouts.
- ``osmosis-rollout init NAME [--template T] [--dir WORKSPACE]`` writes
  ``rollouts/NAME/main.py``, ``rollouts/NAME/policy.py``, ``configs/eval/NAME.toml`` and
  ``data/NAME.jsonl`` from a template. Every target is checked first: when any exists,
  nothing is written and the error lists them.
- ``osmosis-rollout validate [--dataset PATH ...] [--config PATH] [ENTRYPOINT]`` runs the
  plugin's preflight checks (dataset contract, eval config, entrypoint import) and prints
  one line per check; the exit status is 1 when any check fails. With no argument it
  validates the workspace in the current directory: every ``rollouts/*/main.py``, every
  ``configs/eval/*.toml`` and every ``data/*.jsonl``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from osmosis_rollout.templates import (
    TEMPLATES,
    get_template,
    render_template,
    template_targets,
    validate_rollout_name,
)

__all__ = [
    "CheckResult",
    "add_parser",
    "check_dataset",
    "check_entrypoint",
    "check_eval_config",
    "init_rollout",
    "run_init",
    "run_templates",
    "run_validate",
]

DEFAULT_TEMPLATE = "multiply-openai"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def add_parser(subparsers: Any) -> None:
    """Register the ``templates``, ``init`` and ``validate`` subcommands."""
    listing = subparsers.add_parser(
        "templates",
        help="list the starter rollouts `init` can write",
        description="List the starter rollouts `osmosis-rollout init --template` can write.",
    )
    listing.set_defaults(handler=run_templates)

    init = subparsers.add_parser(
        "init",
        help="write a new rollout into a workspace from a template",
        description=(
            "Write rollouts/NAME/main.py, rollouts/NAME/policy.py, configs/eval/NAME.toml "
            "and data/NAME.jsonl into the workspace. Existing files are never overwritten: "
            "if any target exists, nothing is written."
        ),
    )
    init.add_argument("name", help="rollout name: lowercase letters, digits, '-' and '_'")
    init.add_argument(
        "--template",
        "-t",
        default=DEFAULT_TEMPLATE,
        choices=list(TEMPLATES),
        help=f"starter to copy (default {DEFAULT_TEMPLATE}; see `osmosis-rollout templates`)",
    )
    init.add_argument(
        "--dir",
        default=".",
        metavar="WORKSPACE",
        help="workspace root to write into (default: the current directory)",
    )
    init.set_defaults(handler=run_init)

    validate = subparsers.add_parser(
        "validate",
        help="run the preflight checks: dataset, eval config, entrypoint",
        description=(
            "Run the same checks as the pytest plugin's preflight items and print one line "
            "per check. Exit status 1 when any check fails. With no arguments, validate the "
            "workspace in the current directory (rollouts/*/main.py, configs/eval/*.toml, "
            "data/*.jsonl)."
        ),
    )
    validate.add_argument(
        "entrypoint",
        nargs="?",
        default=None,
        help="rollout entrypoint, path/to/main.py[:ATTR] or package.module[:ATTR]",
    )
    validate.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="PATH",
        help="dataset file to check (.jsonl, .csv, .parquet); repeatable",
    )
    validate.add_argument(
        "--config", action="append", default=[], metavar="PATH", help="eval TOML to check"
    )
    validate.add_argument(
        "--submit",
        action="store_true",
        help="also apply the submit-only rules (an eval config must have [secrets])",
    )
    validate.set_defaults(handler=run_validate)


# --------------------------------------------------------------------------- templates


def run_templates(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print one line per template: its name, what it shows, and the extra it needs."""
    out = out or sys.stdout
    width = max(len(name) for name in TEMPLATES)
    for template in TEMPLATES.values():
        print(
            f"{template.name:<{width}}  {template.description} "
            f'(pip install "pytest-osmosis[{template.extra}]")',
            file=out,
        )
    return EXIT_OK


# --------------------------------------------------------------------------- init


def init_rollout(name: str, template: str, workspace: str | Path) -> list[Path]:
    """Write the files of ``template`` for rollout ``name`` under ``workspace``.

    Returns the paths written. Raises ``ValueError`` for a bad name or template and
    ``FileExistsError`` (listing every existing target) when any target exists; in both
    cases nothing is written.
    """
    validate_rollout_name(name)
    chosen = get_template(template)
    root = Path(workspace)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"workspace {root} is not a directory")
    existing = [root / rel for rel in template_targets(name) if (root / rel).exists()]
    if existing:
        listed = "\n".join(f"  {path}" for path in existing)
        raise FileExistsError(
            f"refusing to overwrite {len(existing)} existing file(s):\n{listed}\n"
            "  fix: choose another rollout name, or move these files away"
        )
    files = render_template(chosen, name)
    written: list[Path] = []
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        # "x": never clobber a file that appeared since the check above.
        with target.open("x", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        written.append(target)
    return written


def run_init(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``osmosis-rollout init``: write the files and say how to run them."""
    out, err = out or sys.stdout, err or sys.stderr
    try:
        written = init_rollout(args.name, args.template, args.dir)
    except (ValueError, FileExistsError, NotADirectoryError) as exc:
        print(f"osmosis-rollout init: error: {exc}", file=err)
        return EXIT_USAGE
    root = Path(args.dir)
    print(f"created rollout {args.name!r} from template {args.template!r}:", file=out)
    for path in written:
        print(f"  {path}", file=out)
    extra = get_template(args.template).extra
    print(
        "\nnext:\n"
        f'  pip install "pytest-osmosis[{extra}]"   # if not installed\n'
        + (f"  cd {root}\n" if root.resolve() != Path.cwd().resolve() else "")
        + f"  osmosis-rollout validate --dataset data/{args.name}.jsonl "
        f"--config configs/eval/{args.name}.toml rollouts/{args.name}/main.py\n"
        f"  pytest --osmosis-dataset data/{args.name}.jsonl "
        f"--osmosis-rollout rollouts/{args.name}/main.py "
        f"--osmosis-policy rollouts/{args.name}/policy.py:policy",
        file=out,
    )
    return EXIT_OK


# --------------------------------------------------------------------------- validate


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


def check_dataset(path: str | Path) -> CheckResult:
    """The dataset contract (spec II.7); the platform's row minimum is a warning locally."""
    from osmosis_rollout.dataset import validate_dataset

    name = f"dataset[{path}]"
    if not Path(path).is_file():
        return CheckResult(name, False, f"file not found: {path}")
    report = validate_dataset(path)
    if not report.ok:  # the report lists each error with its fix, then the warnings
        return CheckResult(name, False, _without_source(report.format(), report.path))
    summary = f"valid {report.mode} dataset, {report.n_rows} row(s)" if report.mode else "ok"
    return CheckResult(name, True, summary, tuple(report.warnings))


def check_eval_config(path: str | Path, *, submit: bool = False) -> CheckResult:
    """The eval TOML (spec II.8.1); with ``submit``, ``[secrets]`` is required as well."""
    from osmosis_rollout.errors import ConfigError
    from osmosis_rollout.eval_config import load_eval_config

    name = f"eval-config[{path}]"
    try:
        config = load_eval_config(path, require_secrets=submit)
    except ConfigError as exc:
        return CheckResult(name, False, _without_source(str(exc), str(path)))
    experiment = config.experiment
    detail = (
        f"rollout {experiment.rollout!r}, entrypoint {experiment.entrypoint!r}, "
        f"model {experiment.model_path!r}, dataset {experiment.dataset!r}"
    )
    warnings = list(config.warnings)
    workspace = Path(path).resolve().parent.parent.parent
    entrypoint = config.entrypoint_path(workspace)
    if (workspace / "rollouts").is_dir() and not entrypoint.is_file():
        warnings.append(f"entrypoint {entrypoint} does not exist in this workspace")
    return CheckResult(name, True, detail, tuple(warnings))


def check_entrypoint(entrypoint: str, base_dir: Path | None = None) -> CheckResult:
    """The entrypoint imports and exposes a rollout: workflow and grader, or a backend/app."""
    from osmosis_rollout.entrypoint import load_entrypoint
    from osmosis_rollout.errors import EntrypointError

    name = f"entrypoint[{entrypoint}]"
    try:
        loaded = load_entrypoint(entrypoint, base_dir=base_dir or Path.cwd())
    except EntrypointError as exc:
        return CheckResult(name, False, str(exc))
    except Exception as exc:  # an import-time failure of user code, whatever it is
        return CheckResult(
            name, False, f"importing {entrypoint} raised {type(exc).__name__}: {exc}"
        )
    if loaded.backend is None:
        return CheckResult(name, False, "exposes no workflow/grader, backend or app")
    if loaded.found == "classes" and loaded.grader is None:
        return CheckResult(
            name,
            False,
            "defines a workflow but no Grader subclass, so rows could not be rewarded\n"
            "fix: define one Grader subclass in the entrypoint",
        )
    return CheckResult(name, True, _describe_loaded(loaded))


def _describe_loaded(loaded: Any) -> str:
    backend = loaded.backend
    workflow = loaded.workflow or getattr(backend, "workflow_cls", None)
    grader = loaded.grader or getattr(backend, "grader_cls", None)
    parts = []
    if loaded.app is not None:
        parts.append("app")
    parts.append(type(backend).__name__)
    if workflow is not None:
        parts.append(f"workflow {workflow.__name__}")
    parts.append(f"grader {grader.__name__}" if grader is not None else "no grader")
    return ", ".join(parts)


def _without_source(message: str, source: str) -> str:
    prefix = f"{source}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def _workspace_defaults(root: Path) -> tuple[list[str], list[str], list[str]]:
    """Entrypoints, eval configs and datasets of the workspace at ``root``, relative to it."""

    def found(pattern: str) -> list[str]:
        return [str(path.relative_to(root)) for path in sorted(root.glob(pattern))]

    return found("rollouts/*/main.py"), found("configs/eval/*.toml"), found("data/*.jsonl")


def run_validate(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``osmosis-rollout validate``: one line per check; 1 when any check fails."""
    out, err = out or sys.stdout, err or sys.stderr
    entrypoints = [args.entrypoint] if args.entrypoint else []
    configs, datasets = list(args.config), list(args.dataset)
    if not (entrypoints or configs or datasets):
        entrypoints, configs, datasets = _workspace_defaults(Path.cwd())
        if not (entrypoints or configs or datasets):
            print(
                "osmosis-rollout validate: error: nothing to validate: pass --dataset, "
                "--config or an ENTRYPOINT, or run it in a workspace with rollouts/*/main.py",
                file=err,
            )
            return EXIT_USAGE
    checks: list[Callable[[], CheckResult]] = [
        *(lambda p=path: check_dataset(p) for path in datasets),
        *(lambda p=path: check_eval_config(p, submit=args.submit) for path in configs),
        *(lambda e=entry: check_entrypoint(e) for entry in entrypoints),
    ]
    failed = 0
    for check in checks:
        result = check()
        failed += not result.ok
        print(result.format(), file=out, flush=True)
    total = len(checks)
    if failed:
        print(f"{failed} of {total} check(s) failed", file=out)
        return EXIT_FAILED
    print(f"all {total} check(s) passed", file=out)
    return EXIT_OK
