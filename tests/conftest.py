"""Shared fixtures for the project's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from _support.inner_runs import INNER_RUN_ADDOPTS

TESTS = Path(__file__).parent

#: Folders whose files take longest (Ray clusters, thousands of rollouts, servers draining,
#: subprocess pytest runs; the venvs they use are built before pytest): collected first, so
#: xdist (``--dist loadfile`` hands out files in collection order) starts them first instead
#: of leaving one worker finishing them while the others are idle.
SLOW_FIRST = ("packaging", "ray", "reliability", "examples", "interop")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        folder = item.path.relative_to(TESTS).parts[0] if TESTS in item.path.parents else ""
        return SLOW_FIRST.index(folder) if folder in SLOW_FIRST else len(SLOW_FIRST)

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
