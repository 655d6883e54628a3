"""Fixtures for the Ray tests: one local Ray cluster for all of them (2 CPUs, no dashboard).

The cluster is ``ray start --head --block`` in a subprocess on loopback, stopped (with every
process it started) by terminating that one command at the end of the session: starting one
takes ~5-10 s, so the Ray test files an xdist worker runs share it. Token auth is
turned off for it and for every driver the tests start (``RAY_AUTH_MODE=disabled``), so
tests never depend on a token in the home directory. Without Ray installed the whole
directory is skipped.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray", reason='ray is not installed: pip install "pytest-osmosis[ray]"')

sys.path.insert(0, str(Path(__file__).parent))

from ray_support import (
    RayCluster,
    start_ray_cluster,
)


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    """A 2-CPU Ray head on loopback; drivers here and in subprocesses join it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_MODE", "disabled")
        patch.delenv("RAY_ADDRESS", raising=False)
        cluster = start_ray_cluster(tmp_path_factory.mktemp("ray-head"))
        try:
            yield cluster
        finally:
            cluster.stop()


@pytest.fixture(scope="module")
def rollout_dir() -> Path:
    """The directory shipped to the cluster: ``main.py`` and its sibling ``helpers.py``."""
    return Path(__file__).parent / "rollout"


@pytest.fixture(autouse=True)
def _no_ray_address(monkeypatch: pytest.MonkeyPatch) -> None:
    """A RAY_ADDRESS from the environment must not steer the tests to another cluster."""
    if "RAY_ADDRESS" in os.environ:
        monkeypatch.delenv("RAY_ADDRESS")
