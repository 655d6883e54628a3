"""Fixtures for the rollout server tests; helpers live in ``server_support``."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from server_support import Gate


@pytest.fixture(autouse=True)
def _fresh_gates() -> Iterator[None]:
    """Every test starts with no workflow gates."""
    Gate.events = {}
    yield
    Gate.events = {}
