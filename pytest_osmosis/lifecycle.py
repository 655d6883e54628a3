"""The session's lifecycle behind the hooks in ``plugin.py``: configure, collect, run, finish.

Writing files and printing the summary happen only on the controlling process (not on
pytest-xdist workers), from records that reach it on each test report.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from pytest_osmosis.keys import DATASETS_KEY, REPORT_ATTR, RESULT_KEY, SESSION_KEY
from pytest_osmosis.options import raw_value, resolve_path, resolve_settings
from pytest_osmosis.reporting import RowRecord, summary_lines
from pytest_osmosis.session import OsmosisSession
from pytest_osmosis.workspace import default_eval_config, discover_entrypoint, find_workspace


def is_worker(config: pytest.Config) -> bool:
    """True inside a pytest-xdist worker process."""
    return hasattr(config, "workerinput")


def _toml_defaults(config: pytest.Config, path: Path) -> dict[str, Any]:
    from osmosis_rollout.errors import ConfigError
    from osmosis_rollout.eval_config import load_eval_config

    try:
        cfg = load_eval_config(path)
    except ConfigError as exc:
        raise pytest.UsageError(f"pytest-osmosis: {exc}") from exc
    ev = cfg.evaluation
    defaults: dict[str, Any] = {}
    for stem, value in (
        ("pass_threshold", getattr(ev, "pass_threshold", None)),
        ("n", getattr(ev, "n", None)),
        ("limit", getattr(ev, "limit", None)),
        ("agent_timeout", getattr(ev, "agent_workflow_timeout_s", None)),
        ("grader_timeout", getattr(ev, "grader_timeout_s", None)),
        ("concurrency", getattr(ev, "batch_size", None)),
        ("model", getattr(cfg.experiment, "model_path", None)),
    ):
        if value is not None:
            defaults[stem] = value
    if defaults.get("limit") is not None and int(defaults["limit"]) <= 0:
        defaults.pop("limit")
    experiment = cfg.experiment
    rollout, entry = getattr(experiment, "rollout", None), getattr(experiment, "entrypoint", None)
    if rollout and entry:
        workspace = path.resolve().parent.parent.parent
        defaults["rollout"] = str(workspace / "rollouts" / rollout / entry)
    return defaults


def configure_session(config: pytest.Config) -> None:
    """Resolve settings; when datasets are given, point collection at them."""
    datasets = [str(p) for p in (raw_value(config, "dataset") or [])]
    if not datasets:
        ensure_session(config)
        return
    invocation = Path(config.invocation_params.dir)
    dataset_paths = [resolve_path(config, d) for d in datasets]
    for path in dataset_paths:
        if not path.is_file():
            raise pytest.UsageError(f"--osmosis-dataset: file not found: {path}")
    workspace = find_workspace(
        [invocation, Path(config.rootpath), *(p.parent for p in dataset_paths)]
    )
    config_value = raw_value(config, "config")
    rollout_flag = raw_value(config, "rollout")
    eval_config = resolve_path(config, config_value) if config_value else None
    if eval_config is not None and not eval_config.is_file():
        raise pytest.UsageError(f"--osmosis-config: file not found: {eval_config}")
    needs_entrypoint = not (raw_value(config, "server"))
    entrypoint = rollout_flag
    if eval_config is None and entrypoint is None and needs_entrypoint:
        entrypoint = discover_entrypoint(workspace)
    if eval_config is None and entrypoint is not None:
        eval_config = default_eval_config(workspace, entrypoint)
    toml = _toml_defaults(config, eval_config) if eval_config is not None else {}
    settings = resolve_settings(config, toml)
    if settings.rollout and not rollout_flag:
        entrypoint = settings.rollout
    if entrypoint is None and needs_entrypoint:
        entrypoint = discover_entrypoint(workspace)
    config.stash[SESSION_KEY] = OsmosisSession(
        config, settings, workspace=workspace, entrypoint=entrypoint, eval_config=eval_config
    )
    config.stash[DATASETS_KEY] = {p.resolve() for p in dataset_paths}
    if not is_worker(config):
        config.pluginmanager.register(
            ReportCollector(config.stash[SESSION_KEY]), "osmosis-report-collector"
        )
    if settings.baseline:
        # Fail before any rollout runs, not after all of them.
        from pytest_osmosis.gates import load_baseline

        load_baseline(resolve_path(config, settings.baseline))
    _point_collection_at_datasets(config, dataset_paths)


def _point_collection_at_datasets(config: pytest.Config, dataset_paths: list[Path]) -> None:
    """Decide what pytest collects when datasets are configured.

    No paths on the command line: just the datasets (not the whole tree). Explicit paths:
    those, plus the datasets given by ``--osmosis-dataset`` on the command line that no path
    already names; datasets set only in the ini do not join an explicit selection, so
    ``pytest tests/unit`` or ``pytest data/test.jsonl::row-3`` run just what was named.
    """
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


def ensure_session(config: pytest.Config) -> OsmosisSession:
    """The session, created on first use when no dataset was given (marker-driven rows)."""
    session = config.stash.get(SESSION_KEY, None)
    if session is None:
        session = OsmosisSession(
            config, resolve_settings(config), workspace=None, entrypoint=None, eval_config=None
        )
        config.stash[SESSION_KEY] = session
    return session


def unconfigure_session(config: pytest.Config) -> None:
    session = config.stash.get(SESSION_KEY, None)
    if session is not None:
        session.close()
        session.report.close()


def dataset_collector(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    datasets = parent.config.stash.get(DATASETS_KEY, None)
    if not datasets or file_path.resolve() not in datasets:
        return None
    from pytest_osmosis.collection import DatasetFile

    return DatasetFile.from_parent(parent, path=file_path)


def report_header(config: pytest.Config) -> list[str] | None:
    session = config.stash.get(SESSION_KEY, None)
    if session is None or not session.settings.active:
        return None
    d = session.describe()
    return [
        f"osmosis: {d['mode']}, rollout {d['entrypoint'] or ', '.join(d['servers'])}, "
        f"policy {d['policy'] or 'replay/config'}, threshold {d['pass_threshold']:g}, n {d['n']}"
        + (f", concurrency {d['concurrency']}" if d["concurrency"] else ""),
        f"osmosis output: {d['output']}",
    ]


def attach_record(item: pytest.Item, report: pytest.TestReport) -> None:
    """Move a finished row's record from the item onto its call report."""
    from pytest_osmosis.keys import RECORD_KEY

    if report.when == "call" and RECORD_KEY in item.stash:
        setattr(report, REPORT_ATTR, item.stash[RECORD_KEY])
        del item.stash[RECORD_KEY]


def _row_items(items: list[pytest.Item]) -> list[Any]:
    from pytest_osmosis.collection import RowItem

    return [item for item in items if isinstance(item, RowItem) or _marker_row(item) is not None]


def _marker_row(item: pytest.Item) -> Any:
    """The dataset row of a test parametrized by ``@pytest.mark.osmosis_dataset`` that asks for its result."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "osmosis_result" not in getattr(item, "fixturenames", ()):
        return None
    return callspec.params.get("osmosis_row")


def _submit(osmosis: OsmosisSession, item: pytest.Item) -> None:
    from pytest_osmosis.collection import RowItem

    if isinstance(item, RowItem):
        osmosis.submit(item)
        return
    row = _marker_row(item)
    if row is not None:
        osmosis.submit_row(item.nodeid, row)


def start_rows(session: pytest.Session) -> None:
    """Start every selected row's rollouts ahead of pytest's in-order reporting."""
    config = session.config
    if config.option.collectonly or is_worker(config):
        return
    rows = _row_items(session.items)
    if not rows:
        return
    osmosis = ensure_session(config)
    try:
        osmosis.run_ahead([functools.partial(_submit, osmosis, item) for item in rows])
    except pytest.UsageError as exc:
        # A user mistake (no policy, a broken entrypoint): say it once and stop.
        pytest.exit(str(exc), returncode=pytest.ExitCode.USAGE_ERROR)
    except Exception:
        # The session remembers the setup error; every row reports it when it runs.
        return


def start_worker_queue(item: pytest.Item) -> None:
    """Under xdist, start the rollouts of every row queued on this worker, not just this one."""
    config = item.config
    if not is_worker(config):
        return
    queued: list[int] = []
    for plugin in config.pluginmanager.get_plugins():
        if type(plugin).__name__ == "WorkerInteractor":
            torun = getattr(plugin, "torun", None)
            if torun is not None:
                with torun.lock() as pending:
                    queued = [i for i in pending if isinstance(i, int)]
    items = item.session.items
    candidates = _row_items([item, *(items[i] for i in queued if i < len(items))])
    if not candidates:
        return
    osmosis = ensure_session(config)
    try:
        for candidate in candidates:
            _submit(osmosis, candidate)
    except Exception:
        return


def finish_rows(session: pytest.Session) -> None:
    osmosis = session.config.stash.get(SESSION_KEY, None)
    if osmosis is not None:
        osmosis.close()


class ReportCollector:
    """A named plugin that keeps each row's record from its report (controller only).

    Under pytest-xdist, reports of rows run on workers reach the controller's hook with
    their ``user_properties``, so one collector sees every row exactly once.
    """

    def __init__(self, session: OsmosisSession) -> None:
        self.session = session

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        value = getattr(report, REPORT_ATTR, None)
        if report.when != "call" or not isinstance(value, dict):
            return
        self.session.report.add(
            RowRecord(
                nodeid=value["nodeid"],
                dataset=value["dataset"],
                row_key=value["row_key"],
                verdict=value["verdict"],
                attempts=value["attempts"],
                stats=value.get("stats", {}),
            )
        )
        # pytest keeps every report for the session: do not keep the record twice.
        delattr(report, REPORT_ATTR)


def session_finish(session: pytest.Session, exitstatus: int) -> None:
    """Write the report files and apply the suite gates (controller only)."""
    config = session.config
    if is_worker(config) or config.option.collectonly:
        return
    osmosis = config.stash.get(SESSION_KEY, None)
    if osmosis is None or not osmosis.report.rows:
        return
    from pytest_osmosis.gates import apply_gates

    report = osmosis.report
    report.close()
    extra, verdict_lines, exit_override = apply_gates(osmosis, session, int(exitstatus))
    paths = [osmosis.output / "report.json"]
    if osmosis.settings.report:
        paths.append(resolve_path(config, osmosis.settings.report))
    document = report.write(extra, paths)
    summary = document["summary"]
    html_path = None
    if osmosis.settings.html:
        from pytest_osmosis.html import write_html

        html_path = resolve_path(config, osmosis.settings.html)
        write_html(html_path, document)
    config.stash[RESULT_KEY] = {
        "summary": summary,
        "gate_lines": verdict_lines,
        "paths": [str(p) for p in paths] + ([str(html_path)] if html_path else []),
    }
    if exit_override is not None:
        session.exitstatus = exit_override


def terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    result = config.stash.get(RESULT_KEY, None)
    osmosis = config.stash.get(SESSION_KEY, None)
    if result is None or osmosis is None:
        return
    terminalreporter.section("osmosis summary")
    for line in summary_lines(osmosis.report, result["summary"]):
        terminalreporter.write_line(line)
    for line in result["gate_lines"]:
        terminalreporter.write_line(line)
    for path in result["paths"]:
        terminalreporter.write_line(f"report: {path}")
