"""pytest-osmosis hooks, fixtures and marker registration (registered via ``pytest11``).

Each hook hands over to the module that owns the work: the session plugin (``run/session.py``,
registered by ``startup`` when datasets are configured), ``collect/`` for items, preflight
and pytest-xdist, ``fixtures`` for the marker. Nothing heavy is imported here: ``pytest --help``
and runs without rows pay only for this module, ``keys``, ``options`` and ``fixtures``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_osmosis import fixtures as _fixtures
from pytest_osmosis import hookspecs
from pytest_osmosis.keys import DATASETS_KEY, SESSION_PLUGIN
from pytest_osmosis.options import add_options, check_ini_keys, check_rootdir_kept, raw_value

MARKER = (
    "osmosis_dataset(path, rows=None): parametrize this test by the rows of a dataset file; the test "
    "receives osmosis_row (the row) and osmosis_result (its finished rollout)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Iterator[None]:
    """In a run with rows, route what rollouts print (``run/rollout_log.py``).

    Outermost and first, so pytest's capturing saves (and puts back) the router, not the
    terminal stream; once capturing has started, its own streams are routed too.
    """
    known = early_config.known_args_namespace
    if any(
        getattr(known, dest, None) or early_config.getini(dest)
        for dest in ("osmosis_dataset", "osmosis_config")
    ):
        from pytest_osmosis.run.rollout_log import install_router, route_pytest_capture

        early_config.add_cleanup(install_router())
        result = yield
        capman = early_config.pluginmanager.getplugin("capturemanager")
        early_config.add_cleanup(route_pytest_capture(capman))
        return result
    return (yield)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    check_ini_keys(config)
    if not hasattr(config, "workerinput"):  # xdist's workers run with the controller's rootdir
        # Before the datasets are looked for: a moved rootdir may have left the ini naming
        # them unread, and the run would collect nothing without saying why.
        check_rootdir_kept(config)
    # An eval config without a dataset names one of its own ([experiment].dataset).
    if raw_value(config, "dataset") or raw_value(config, "config"):
        from pytest_osmosis.startup import configure_session

        configure_session(config)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if DATASETS_KEY not in parent.config.stash:
        return None
    from pytest_osmosis.startup import dataset_collector

    return dataset_collector(file_path, parent)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    _fixtures.parametrize_by_marker(metafunc)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if DATASETS_KEY not in config.stash:
        return
    from pytest_osmosis.collect.preflight import order_preflight_items

    order_preflight_items(session, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Tests parametrized by the marker need the session (and its hooks) before the run loop.
    if session.config.pluginmanager.has_plugin(SESSION_PLUGIN):
        return
    if any(item.get_closest_marker("osmosis_dataset") for item in session.items):
        from pytest_osmosis.run.session import ensure_session

        ensure_session(session.config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from pytest_osmosis.collect.xdist_groups import make_scheduler

    return make_scheduler(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    from pytest_osmosis.collect.xdist_groups import share_run_name

    share_run_name(node)


@pytest.fixture
def osmosis_policy() -> Iterator[Any]:
    """osmosis_policy: a scripted policy served on loopback for this test.

    Call it with a callable or a list of replies; it returns a started PolicyServer.
    """
    with _fixtures.policy_servers() as start:
        yield start


@pytest.fixture
def osmosis_run() -> Iterator[Any]:
    """osmosis_run(workflow, grader=None, *, prompt|row, policy, label, ...) -> RunResult: one rollout."""
    yield from _fixtures.osmosis_run_fixture()


@pytest.fixture
def osmosis_row(request: pytest.FixtureRequest) -> Any:
    """osmosis_row: the dataset row of a test parametrized by @pytest.mark.osmosis_dataset."""
    param = getattr(request, "param", None)
    if param is None:
        raise pytest.UsageError(
            f"{request.node.nodeid}: osmosis_row is only available to tests marked "
            "@pytest.mark.osmosis_dataset(path)"
        )
    return param


@pytest.fixture
def osmosis_result(request: pytest.FixtureRequest) -> Any:
    """osmosis_result: the finished rollout of osmosis_row, run by the plugin's scheduler."""
    from pytest_osmosis.run.session import ensure_session

    row = request.getfixturevalue("osmosis_row")
    record = ensure_session(request.config).rows.wait_for_row(request.node.nodeid, row)
    return record.attempts[0] if len(record.attempts) == 1 else record
