"""pytest-osmosis hooks, fixtures and marker registration (registered via ``pytest11``).

Everything else lives in its own module: options (``options``), rows as items
(``collection``), the scheduler (``scheduler``), running one attempt (``runtime``), the
report (``reporting``), gates and baselines (``gates``), fixtures (``fixtures``).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_osmosis import fixtures as _fixtures
from pytest_osmosis.keys import DATASETS_KEY, RECORD_KEY, SESSION_KEY
from pytest_osmosis.options import add_options, raw_value

MARKER = (
    "osmosis_dataset(path, rows=None): parametrize this test by the rows of a dataset file; the test "
    "receives osmosis_row (the row) and osmosis_result (its finished rollout)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_osmosis import newhooks

    pluginmanager.add_hookspecs(newhooks)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    # Without a dataset the runtime is not imported at all: `pytest --help` and ordinary
    # test runs pay only for this module. Marker-driven rows create the session lazily.
    if raw_value(config, "dataset"):
        from pytest_osmosis.lifecycle import configure_session

        configure_session(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    if SESSION_KEY in config.stash:
        from pytest_osmosis.lifecycle import unconfigure_session

        unconfigure_session(config)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if DATASETS_KEY not in parent.config.stash:
        return None
    from pytest_osmosis.lifecycle import dataset_collector

    return dataset_collector(file_path, parent)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if SESSION_KEY not in config.stash:
        return None
    from pytest_osmosis.lifecycle import report_header

    return report_header(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    _fixtures.parametrize_by_marker(metafunc)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    from pytest_osmosis.preflight import add_preflight_items

    add_preflight_items(session, items)


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, object, object]:
    if not _fixtures.may_have_rows(session):
        return (yield)
    from pytest_osmosis.lifecycle import finish_rows, start_rows

    start_rows(session)
    try:
        return (yield)
    finally:
        finish_rows(session)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    if hasattr(item.config, "workerinput") and _fixtures.may_have_rows(item.session):
        from pytest_osmosis.lifecycle import start_worker_queue

        start_worker_queue(item)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.when == "call" and RECORD_KEY in item.stash:
        from pytest_osmosis.lifecycle import attach_record

        attach_record(item, report)
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from pytest_osmosis.distribution import make_scheduler

    return make_scheduler(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    from pytest_osmosis.distribution import share_run_name

    share_run_name(node)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if SESSION_KEY in session.config.stash:
        from pytest_osmosis.lifecycle import session_finish

        session_finish(session, exitstatus)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if SESSION_KEY in config.stash:
        from pytest_osmosis.lifecycle import terminal_summary

        terminal_summary(terminalreporter, config)


@pytest.fixture
def osmosis_policy(request: pytest.FixtureRequest) -> Iterator[Any]:
    """osmosis_policy: a scripted policy served on loopback for this test.

    Call it with a callable or a list of replies; it returns a started PolicyServer.
    """
    yield from _fixtures.osmosis_policy_fixture(request)


@pytest.fixture
def osmosis_run(request: pytest.FixtureRequest) -> Iterator[Any]:
    """osmosis_run(workflow, grader=None, *, prompt|row, policy, label, ...) -> RunResult: one rollout."""
    yield from _fixtures.osmosis_run_fixture(request)


@pytest.fixture
def osmosis_row(request: pytest.FixtureRequest) -> Any:
    """osmosis_row: the dataset row of a test parametrized by @pytest.mark.osmosis_dataset."""
    return _fixtures.osmosis_row_fixture(request)


@pytest.fixture
def osmosis_result(request: pytest.FixtureRequest) -> Any:
    """osmosis_result: the finished rollout of osmosis_row, run by the plugin's scheduler."""
    return _fixtures.osmosis_result_fixture(request)
