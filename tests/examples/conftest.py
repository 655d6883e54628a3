"""Fixtures for the example-rollout tests; helpers live in ``examples.support``."""

from __future__ import annotations

import pytest
from examples.support import EXAMPLE_TEMPLATES


@pytest.fixture(params=sorted(EXAMPLE_TEMPLATES))
def example(request: pytest.FixtureRequest) -> str:
    """Each example workspace's name."""
    name: str = request.param
    return name
