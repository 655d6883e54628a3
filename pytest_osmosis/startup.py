"""From the command line to a registered session, when datasets are configured.

Resolve the settings (command line, ini, then the eval TOML's values as defaults), find the
workspace and the rollout entrypoint, register the :class:`~pytest_osmosis.run.session.OsmosisSession`
plugin, and point pytest's collection at the dataset files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.errors import ConfigError, EntrypointError
from osmosis_rollout.workspace import DATASET_SUFFIXES
from osmosis_rollout.workspace.entrypoint import check_entrypoint_syntax
from osmosis_rollout.workspace.eval_config import load_eval_config
from pytest_osmosis.collect.preflight import PreflightPlugin, preflight_anchor
from pytest_osmosis.keys import DATASETS_KEY
from pytest_osmosis.options import raw_value, resolve_path, resolve_settings
from pytest_osmosis.results.gates import load_baseline
from pytest_osmosis.results.output_paths import Input, check_output_paths, refuse_overwrites
from pytest_osmosis.results.resume import declared_env, reference_file, rollout_files
from pytest_osmosis.run.policy_choice import cassette_dir, check_policy_given
from pytest_osmosis.run.session import OsmosisSession, ensure_session, is_worker
from pytest_osmosis.run.workspace import (
    check_reference_file,
    dataset_from_eval_config,
    default_eval_config,
    discover_entrypoint,
    file_not_found,
    find_workspace,
    shown_path,
)


def _toml_defaults(path: Path) -> dict[str, Any]:
    """The eval TOML's values, by the stem of the option they are the default of."""
    try:
        cfg = load_eval_config(path)
    except ConfigError as exc:
        raise pytest.UsageError(f"pytest-osmosis: {exc}") from exc
    ev, experiment = cfg.evaluation, cfg.experiment
    workspace = path.resolve().parent.parent.parent  # the TOML is configs/eval/NAME.toml
    defaults = {
        "pass_threshold": ev.pass_threshold,
        "n": ev.n,
        "limit": ev.limit if ev.limit is not None and ev.limit > 0 else None,  # <= 0: every row
        "agent_timeout": ev.agent_workflow_timeout_s,
        "grader_timeout": ev.grader_timeout_s,
        "concurrency": ev.batch_size,
        "model": experiment.model_path,
        "price_in": cfg.advanced.get("price_in"),
        "price_out": cfg.advanced.get("price_out"),
        "rollout": str(workspace / "rollouts" / experiment.rollout / experiment.entrypoint),
    }
    return {stem: value for stem, value in defaults.items() if value is not None}


def configure_session(config: pytest.Config) -> None:
    """Resolve settings and register the session; when datasets are given, collect them."""
    from_eval_config = [] if raw_value(config, "dataset") else dataset_from_eval_config(config)
    datasets = raw_value(config, "dataset") or from_eval_config
    if not datasets:
        ensure_session(config)
        return
    invocation = Path(config.invocation_params.dir)
    dataset_paths = [resolve_path(config, d) for d in datasets]
    for path in dataset_paths:
        if not path.is_file():
            raise pytest.UsageError(_dataset_not_found(path, invocation))
    workspace = find_workspace(
        [invocation, Path(config.rootpath), *(p.parent for p in dataset_paths)]
    )
    config_value, entrypoint = raw_value(config, "config"), raw_value(config, "rollout")
    eval_config = resolve_path(config, config_value) if config_value else None
    if eval_config is not None and not eval_config.is_file():
        raise pytest.UsageError(f"--osmosis-config: file not found: {eval_config}")
    if eval_config is None and entrypoint is None and not raw_value(config, "server"):
        entrypoint = discover_entrypoint(workspace)
    if eval_config is None and entrypoint is not None:
        eval_config = default_eval_config(workspace, entrypoint)
    toml = _toml_defaults(eval_config) if eval_config is not None else {}
    if from_eval_config:
        toml["dataset"] = from_eval_config
    settings = resolve_settings(config, toml)
    entrypoint = settings.rollout or entrypoint  # --osmosis-rollout, else the eval config's
    # Each mistake below, found when the rows start, could only end the run from inside
    # pytest's loop: said here, before any row.
    if entrypoint is not None:
        check_reference_file("--osmosis-rollout", entrypoint, invocation)
        try:
            check_entrypoint_syntax(entrypoint, base_dir=invocation)
        except EntrypointError as exc:
            raise pytest.UsageError(str(exc)) from None
        declared_env(entrypoint, base=invocation)  # a malformed OSMOSIS_ENV
    if settings.policy:
        check_reference_file("--osmosis-policy", settings.policy, invocation)
    if not (settings.preflight_only or config.option.collectonly):
        check_policy_given(config, settings)
    session = OsmosisSession(
        config, settings, workspace=workspace, entrypoint=entrypoint, eval_config=eval_config
    )
    _check_outputs(session, dataset_paths, entrypoint, eval_config)
    session.register()
    config.stash[DATASETS_KEY] = {p.resolve() for p in dataset_paths}
    if settings.baseline:  # a bad baseline fails here, before any rollout, not after all
        baseline = resolve_path(config, settings.baseline)
        load_baseline(baseline, allow_partial=settings.allow_partial_baseline)
    _point_collection_at_datasets(config, dataset_paths)
    anchor = preflight_anchor(config, dataset_paths)
    if anchor is not None:
        config.pluginmanager.register(PreflightPlugin(session, anchor), "osmosis-preflight")


def _dataset_not_found(path: Path, base: Path) -> str:
    """Which dataset path is wrong, and the files of that folder it was probably meant to name."""
    if path.is_dir():
        names = sorted(p.name for p in path.iterdir() if p.suffix in DATASET_SUFFIXES)
        listing = (
            ", ".join(shown_path(path / n, base) for n in names[:5])
            or "no .jsonl, .csv or .parquet file"
        )
        return f"--osmosis-dataset: {shown_path(path, base)} is a folder; name a file in it ({listing})"
    return file_not_found("--osmosis-dataset", path, base, DATASET_SUFFIXES)


def _check_outputs(
    session: OsmosisSession, datasets: list[Path], entrypoint: str | None, eval_config: Path | None
) -> None:
    """Before any row runs: a resumable run to resume, and output paths that can be written
    and overwrite none of the files and folders the run reads."""
    config, settings, output = session.config, session.settings, session.output
    if settings.resume:
        from osmosis_rollout.runs.journal import RunJournalError, read_run_file

        if settings.output and resolve_path(config, settings.output).resolve() != output.resolve():
            raise pytest.UsageError(
                "--osmosis-resume and --osmosis-output name different directories: a resumed "
                "run writes into the run it resumes; drop --osmosis-output"
            )
        try:
            read_run_file(output)
        except RunJournalError as exc:
            raise pytest.UsageError(f"--osmosis-resume: {exc}") from exc
        if not is_worker(config) and getattr(config.option, "numprocesses", None):
            # Workers collect at different moments while others append to the journal, so
            # they would not agree on which rows are left: refuse rather than rerun them all.
            raise pytest.UsageError(
                "--osmosis-resume does not combine with pytest-xdist (-n): resume without -n"
            )
    if is_worker(config):
        return
    base = Path(config.invocation_params.dir)
    refs = {"the rollout entrypoint": entrypoint, "the policy": settings.policy}
    read = {what: reference_file(ref, base=base)[1] for what, ref in refs.items() if ref}
    read["the eval config"] = eval_config
    read["the baseline"] = resolve_path(config, settings.baseline) if settings.baseline else None
    inputs = [Input("the dataset", path) for path in datasets]
    inputs += [Input(what, path) for what, path in read.items() if path is not None]
    cassettes = cassette_dir(config, settings)
    inputs.append(Input("the cassettes folder", cassettes, folder=True))
    # The rollout's other modules (what resume fingerprints); its data files may sit beside
    # a report of the user's (an entrypoint at the workspace's top), so only modules count.
    found = rollout_files(entrypoint, base=base, skip=[output, cassettes, *datasets])
    modules = [path for path in found[1] if path.suffix == ".py"] if found else []
    inputs += [Input("a module of the rollout", path) for path in modules]
    if config.inipath is not None:
        inputs.append(Input("the ini file", Path(config.inipath)))
    report, html, markdown = (
        resolve_path(config, value) if value else None
        for value in (settings.report, settings.html, settings.markdown)
    )
    check_output_paths(
        config, output=output, report=report, html=html, markdown=markdown, inputs=inputs
    )
    if not settings.resume and not config.option.collectonly:
        flags = ("--osmosis-report", "--osmosis-html", "--osmosis-markdown")
        files = list(zip(flags, (report, html, markdown), strict=True))
        refuse_overwrites(files, overwrite=settings.overwrite)


def _point_collection_at_datasets(config: pytest.Config, dataset_paths: list[Path]) -> None:
    """No paths on the command line: collect just the datasets (not the whole tree). Explicit
    paths: those, plus the command line's ``--osmosis-dataset`` files no path names; ini
    datasets do not join them, so ``pytest data/test.jsonl::row-3`` runs just that row."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        config.args = [str(p) for p in dataset_paths]
        return
    invocation = Path(config.invocation_params.dir)
    named = {(invocation / arg.split("::", 1)[0]).resolve() for arg in config.args}
    from_cli = {
        resolve_path(config, d).resolve() for d in (config.getoption("osmosis_dataset") or [])
    }
    extra = [str(p) for p in dataset_paths if p.resolve() in from_cli and p.resolve() not in named]
    config.args = [*config.args, *extra]


def dataset_collector(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """A :class:`~pytest_osmosis.collect.items.DatasetFile` for a configured dataset, else ``None``."""
    if file_path.resolve() not in parent.config.stash[DATASETS_KEY]:
        return None
    from pytest_osmosis.collect.items import DatasetFile

    rootpath = parent.config.rootpath
    if file_path.is_relative_to(rootpath):
        return DatasetFile.from_parent(parent, path=file_path)
    # pytest names a file outside the rootdir given as a path "" (its rows "::row-0"): two
    # such datasets would share row ids, and with them journal lines and baselines.
    nodeid = Path(os.path.relpath(file_path, rootpath)).as_posix()
    return DatasetFile.from_parent(parent, path=file_path, nodeid=nodeid)
