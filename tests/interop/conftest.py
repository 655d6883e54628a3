"""Fixtures for the wire-compatibility tests (helpers live in ``interop_support``).

``official_python`` (session) skips when the official SDK venv was not built; ``policy_server``,
``ours_server`` and ``official_server`` (module) are loopback processes stopped at teardown.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from _support.venvs import OFFICIAL_SDK
from interop_support import (
    ServerProcess,
    multiply_policy,
    start_official_server,
    start_our_server,
)


@pytest.fixture(scope="session")
def official_python() -> Path:
    """Python of the official ``osmosis-ai`` 0.3.8 venv, built before pytest by
    ``scripts/test.sh``; skips the test, with the reason, when it is not there."""
    return OFFICIAL_SDK.require()


@pytest.fixture(scope="module")
def policy_server() -> Iterator[Any]:
    """Our policy endpoint (a scripted multiplier) on loopback, in this process."""
    from osmosis_rollout.controller import PolicyServer

    with PolicyServer(multiply_policy) as server:
        yield server


@pytest.fixture(scope="module")
def official_server(
    official_python: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The official SDK's rollout server (official LocalBackend) serving ``rollout_main.py``."""
    server = start_official_server(official_python, tmp_path_factory.mktemp("official-server"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def ours_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Our rollout server serving the migrated ``rollout_main.py``."""
    server = start_our_server(tmp_path_factory.mktemp("ours-server"))
    try:
        yield server
    finally:
        server.stop()
