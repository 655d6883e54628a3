"""Workspace commands: ``template list|apply``, ``templates``, ``init`` and ``validate``.

Each command's ``--help`` (from :func:`add_parser`) says what it writes or checks. Writing
is all-or-nothing: every target is checked first, and when any exists with other content
nothing is written and the error lists them (``--force`` overwrites); a file already there
with the same content is kept. ``validate`` runs the checks of
:mod:`osmosis_rollout.workspace.preflight`, one line each, and exits 1 when any fails.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from osmosis_rollout.errors import ConfigError
from osmosis_rollout.templates import (
    TEMPLATES,
    Template,
    get_template,
    is_template_name,
    render_template,
    run_command,
    validate_rollout_name,
)
from osmosis_rollout.templates.workspace_config import PytestConfig, write_pytest_config
from osmosis_rollout.workspace import workspace_files
from osmosis_rollout.workspace.preflight import (
    CheckResult,
    check_dataset,
    check_entrypoint,
    check_eval_config,
    check_training_config,
    config_entrypoint,
)

__all__ = [
    "AppliedTemplate",
    "add_parser",
    "apply_template",
    "run_apply",
    "run_init",
    "run_templates",
    "run_validate",
]

DEFAULT_TEMPLATE = "multiply-local-openai"

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2

_CONFIG_ACTIONS = {
    "written": "(pytest configuration: a bare `pytest` here runs the rows)",
    "appended": "([tool.pytest.ini_options] added: a bare `pytest` here runs the rows)",
    "unchanged": "(pytest configuration, already there, unchanged)",
    "kept": "(pytest is already configured there, left as it is: run this rollout with the "
    "command below)",
}

_TEMPLATE_CHOICES = [*TEMPLATES, *(alias for t in TEMPLATES.values() for alias in t.aliases)]


def add_parser(subparsers: Any) -> None:
    """Register the ``template``, ``templates``, ``init`` and ``validate`` subcommands."""
    template = subparsers.add_parser(
        "template",
        help="list the starter templates, or apply one to the workspace",
        description="Starter rollouts, with the official SDK's template names.",
    )
    actions = template.add_subparsers(dest="template_command", required=True)
    listing = actions.add_parser("list", help="list the starter templates")
    listing.set_defaults(handler=run_templates)
    apply = actions.add_parser(
        "apply",
        help="write a template into the workspace as the rollout of the same name",
        description=(
            "Write template NAME as rollouts/NAME/ (main.py, policy.py, pyproject.toml), "
            "configs/eval/NAME.toml, configs/training/NAME.toml and its dataset under data/. "
            "Existing files with other content are not overwritten unless --force is given."
        ),
    )
    apply.add_argument("name", choices=_TEMPLATE_CHOICES, metavar="NAME", help="template name")
    _workspace_options(apply)
    apply.set_defaults(handler=run_apply)

    old_listing = subparsers.add_parser(
        "templates",
        help="the same as `template list`",
        description="List the starter templates (the same as `osmosis-rollout template list`).",
    )
    old_listing.set_defaults(handler=run_templates)

    init = subparsers.add_parser(
        "init",
        help="write a new rollout into a workspace from a template",
        description=(
            "Write rollouts/NAME/ (main.py, policy.py, pyproject.toml), configs/eval/NAME.toml, "
            "configs/training/NAME.toml and the template's dataset under data/. Existing "
            "files with other content are not overwritten unless --force is given. "
            "`init TEMPLATE` (a template's name, no --template) applies that template."
        ),
    )
    init.add_argument("name", help="rollout name: lowercase letters, digits, '-' and '_'")
    init.add_argument(
        "--template",
        "-t",
        choices=_TEMPLATE_CHOICES,
        help=f"starter to copy (default {DEFAULT_TEMPLATE}; see `osmosis-rollout template list`)",
    )
    _workspace_options(init)
    init.set_defaults(handler=run_init)

    validate = subparsers.add_parser(
        "validate",
        help="run the preflight checks: dataset, configs, entrypoint",
        description=(
            "Run the same checks as the pytest plugin's preflight items and print one line "
            "per check. Exit status 1 when any check fails. With no arguments, validate the "
            "workspace in the current directory (rollouts/*/main.py, configs/eval/*.toml, "
            "configs/training/*.toml, data/*)."
        ),
    )
    validate.add_argument(
        "entrypoint",
        nargs="?",
        help="rollout entrypoint, path/to/main.py[:ATTR] or package.module[:ATTR]",
    )
    for flag, what in (
        ("--dataset", "dataset file to check (.jsonl, .csv, .parquet); repeatable"),
        ("--config", "eval TOML to check (its rollout's entrypoint is imported too); repeatable"),
        (
            "--training-config",
            "training TOML to check (official sections; its entrypoint is imported too)",
        ),
    ):
        validate.add_argument(flag, action="append", default=[], metavar="PATH", help=what)
    validate.add_argument(
        "--submit",
        action="store_true",
        help="also apply the submit-only rules ([secrets] required, configs in a workspace)",
    )
    validate.set_defaults(handler=run_validate)


def _workspace_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        default=".",
        metavar="WORKSPACE",
        help="workspace root to write into (default: the current directory)",
    )
    parser.add_argument(
        "--force", "-f", action="store_true", help="overwrite existing files instead of refusing"
    )


# --------------------------------------------------------------------------- templates


def run_templates(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """One line per template: its name, what it shows, its aliases and the extra it needs."""
    out = out or sys.stdout
    width = max(len(name) for name in TEMPLATES)
    for template in TEMPLATES.values():
        aliases = f"alias {', '.join(template.aliases)}; " if template.aliases else ""
        print(
            f"{template.name:<{width}}  {template.description} "
            f'({aliases}pip install "pytest-osmosis[{template.extra}]")',
            file=out,
        )
    return EXIT_OK


@dataclass
class AppliedTemplate:
    """What applying a template did: files written, and files already there unchanged."""

    template: Template
    rollout: str
    root: Path
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    pytest_config: PytestConfig | None = None
    """The workspace's pytest configuration: written for this rollout, or one already there."""


def apply_template(
    template: str, rollout: str, workspace: str | Path, *, force: bool = False
) -> AppliedTemplate:
    """Write ``template`` as rollout ``rollout`` under ``workspace``.

    Raises ``ValueError`` for a bad name or template and ``FileExistsError`` (listing every
    conflicting target) when a target exists with other content and ``force`` is off; in
    both cases nothing is written.
    """
    validate_rollout_name(rollout)
    chosen = get_template(template)
    root = Path(workspace)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"workspace {root} is not a directory")
    files = {root / rel: text for rel, text in render_template(chosen, rollout).items()}
    same = [p for p, text in files.items() if p.is_file() and p.read_text("utf-8") == text]
    existing = [p for p in files if p.exists() and p not in same]
    if existing and not force:
        listed = "\n".join(f"  {path}" for path in existing)
        raise FileExistsError(
            f"refusing to overwrite {len(existing)} existing file(s):\n{listed}\n"
            "  fix: choose another rollout name, move these files away, or pass --force"
        )
    applied = AppliedTemplate(chosen, rollout, root, unchanged=same)
    for target, text in files.items():
        if target in same:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        # "x": never clobber a file that appeared since the check above, unless forced.
        with target.open("w" if force else "x", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        applied.written.append(target)
    applied.pytest_config = write_pytest_config(root, chosen, rollout)
    return applied


def _report(applied: AppliedTemplate, out: TextIO, note: str | None = None) -> None:
    template, name, root = applied.template, applied.rollout, applied.root
    config = applied.pytest_config
    changed = applied.written or (config is not None and config.action in ("written", "appended"))
    if changed:
        print(f"created rollout {name!r} from template {template.name!r}:", file=out)
    else:
        print(
            f"rollout {name!r} from template {template.name!r} is already there, every file "
            "unchanged; nothing written:",
            file=out,
        )
    for path in applied.written:
        print(f"  {path}", file=out)
    for path in applied.unchanged:
        print(f"  {path} (already there, unchanged)", file=out)
    run = run_command(name, template.dataset)
    if config is not None:
        print(f"  {config.path} {_CONFIG_ACTIONS[config.action]}", file=out)
    if note:
        print(note, file=out)
    cd = f"  cd {root}\n" if root.resolve() != Path.cwd().resolve() else ""
    if config is not None and config.action != "kept":
        # The written configuration runs this rollout: a bare pytest is the whole command.
        run = (
            f"pytest          # {config.path.name} names the dataset and policy; in full:\n  {run}"
        )
    print(
        "\nnext, offline (no API key):\n"
        f'  pip install "pytest-osmosis[{template.extra}]"   # if not installed\n'
        f"{cd}"
        f"  osmosis-rollout validate --config configs/eval/{name}.toml\n"
        f"  {run}\n"
        "\nthen, on the platform, with the official CLI (osmosis-ai):\n"
        f"  osmosis eval submit configs/eval/{name}.toml\n"
        f"  osmosis train submit configs/training/{name}.toml",
        file=out,
    )


def _write(
    template: str,
    rollout: str,
    args: argparse.Namespace,
    out: TextIO,
    err: TextIO,
    note: str | None,
) -> int:
    try:
        applied = apply_template(template, rollout, args.dir, force=args.force)
    except (ValueError, FileExistsError, NotADirectoryError) as exc:
        print(f"osmosis-rollout {args.command}: error: {exc}", file=err)
        return EXIT_USAGE
    _report(applied, out, note)
    return EXIT_OK


def run_apply(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``osmosis-rollout template apply NAME``: the rollout takes the template's name."""
    out, err = out or sys.stdout, err or sys.stderr
    return _write(args.name, get_template(args.name).name, args, out, err, None)


def run_init(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``osmosis-rollout init``: write the files and say how to run them."""
    out, err = out or sys.stdout, err or sys.stderr
    if args.template is None and is_template_name(args.name):
        chosen = get_template(args.name)
        note = (
            f"({args.name!r} is a template, so `init {args.name}` applied it as rollout "
            f"{chosen.name!r}, like `osmosis-rollout template apply {args.name}`; for a "
            f"rollout of your own name: osmosis-rollout init NAME --template {chosen.name})"
        )
        return _write(chosen.name, chosen.name, args, out, err, note)
    return _write(args.template or DEFAULT_TEMPLATE, args.name, args, out, err, None)


# --------------------------------------------------------------------------- validate


def _plan(args: argparse.Namespace) -> list[Callable[[], CheckResult]] | None:
    """The checks to run, in order; ``None`` when there is nothing to validate."""
    root = Path.cwd()
    entrypoints = [args.entrypoint] if args.entrypoint else []
    configs, datasets = list(args.config), list(args.dataset)
    trainings: list[str] = list(args.training_config)
    if not (entrypoints or configs or datasets or trainings):
        found = [[str(p.relative_to(root)) for p in group] for group in workspace_files(root)]
        entrypoints, configs, trainings, datasets = found
        if not (entrypoints or configs or datasets or trainings):
            return None
    checks: list[Callable[[], CheckResult]] = [
        *(functools.partial(check_dataset, path) for path in datasets),
        *(functools.partial(check_eval_config, path, submit=args.submit) for path in configs),
        *(functools.partial(check_training_config, p, submit=args.submit) for p in trainings),
    ]
    # A config's entrypoint is imported too (as the official submit preflight does), once.
    seen = {(root / entry).resolve() for entry in entrypoints}
    named: list[str] = []
    for path in [*configs, *trainings]:
        entry = _config_entrypoint(path)
        if entry is not None and entry.is_file() and entry.resolve() not in seen:
            seen.add(entry.resolve())
            inside = entry.resolve().is_relative_to(root.resolve())
            named.append(str(entry.resolve().relative_to(root.resolve())) if inside else str(entry))
    checks += [functools.partial(check_entrypoint, entry) for entry in [*entrypoints, *named]]
    return checks


def _config_entrypoint(path: str) -> Path | None:
    """The entrypoint a config names, when the config parses (errors are its own check's)."""
    from osmosis_rollout.workspace.eval_config import read_experiment

    try:
        experiment = read_experiment(path)
    except ConfigError:
        return None
    return config_entrypoint(path, experiment)


def run_validate(
    args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``osmosis-rollout validate``: one line per check; 1 when any check fails."""
    out, err = out or sys.stdout, err or sys.stderr
    checks = _plan(args)
    if checks is None:
        print(
            "osmosis-rollout validate: error: nothing to validate: pass --dataset, "
            "--config, --training-config or an ENTRYPOINT, or run it in a workspace with "
            "rollouts/*/main.py",
            file=err,
        )
        return EXIT_USAGE
    failed = 0
    for check in checks:
        result = check()
        failed += not result.ok
        print(result.format(), file=out, flush=True)
    total = len(checks)
    # The one place check results become an exit status.
    if failed:
        print(f"{failed} of {total} check(s) failed", file=out)
        return EXIT_FAILED
    print(f"all {total} check(s) passed", file=out)
    return EXIT_OK
