"""Shared fixtures for the project's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support.inner_runs import INNER_RUN_ADDOPTS

TESTS = Path(__file__).parent

#: The files that take longest, longest first (each file's time on the whole suite at ``-n 4``,
#: the third pass's figures in bench/RESULTS.md): handed out first, so that none of them is
#: started last and keeps one worker busy after the others are done.
SLOWEST_FILES = (
    "examples/test_examples.py",
    "interop/test_public_api_differential.py",
    "plugin/test_plugin_progress.py",
    "examples/test_workspace_cli.py",
    "plugin/test_plugin_why_errored.py",
    "examples/test_docs_commands.py",
    "reliability/test_load.py",
    "examples/test_quickstart.py",
    "interop/test_drop_in_behaviour.py",
    "plugin/test_signals.py",
    "plugin/test_plugin_gating.py",
    "interop/test_model_errors_differential.py",
)

#: Then the folders whose files take long (Ray clusters, thousands of rollouts, servers
#: draining, subprocess pytest runs; the venvs they use are built before pytest).
SLOW_FIRST = ("packaging", "ray", "reliability", "examples", "interop")


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist (3.x) hands out ``--dist loadfile`` files largest (most tests) first, which
    # puts the slowest files, most with few tests, last; keep the order collection gives.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order files slowest first (``SLOWEST_FILES``, then ``SLOW_FIRST``): xdist's
    ``--dist loadfile`` hands them to the workers in this order."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        if TESTS not in item.path.parents:
            return (2, 0)
        relative = item.path.relative_to(TESTS)
        if relative.as_posix() in SLOWEST_FILES:
            return (0, SLOWEST_FILES.index(relative.as_posix()))
        folder = relative.parts[0]
        return (1, SLOW_FIRST.index(folder) if folder in SLOW_FIRST else len(SLOW_FIRST))

    items.sort(key=rank)  # stable: each file's tests stay together and in their order


@pytest.fixture(autouse=True)
def _artifact_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep every rollout's artifacts under the test's tmp dir, never in ~/.osmosis."""
    root = tmp_path / "artifact-root"
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_ARTIFACT_ROOT", str(root))
    return root


@pytest.fixture(autouse=True)
def _not_on_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest runs (pytester, subprocesses) format as on a developer's machine.

    With ``CI`` or ``BUILD_NUMBER`` set, pytest prints each failure's whole message again in
    the short summary, so a test counting lines of a failure text would see them twice on CI.
    """
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("BUILD_NUMBER", raising=False)


@pytest.fixture(autouse=True)
def _lean_inner_runs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest runs start without the suite's test-only plugins (``INNER_RUN_ADDOPTS``)."""
    if "pytester" in request.fixturenames:
        # Made first: pytester clears PYTEST_ADDOPTS when it is made, which would undo this.
        request.getfixturevalue("pytester")
    monkeypatch.setenv("PYTEST_ADDOPTS", INNER_RUN_ADDOPTS)
