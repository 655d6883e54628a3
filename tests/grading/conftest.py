"""Fixtures for the grading tests; shared data lives in ``grading_support``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from grading_support import SHAPES


@pytest.fixture(params=sorted(SHAPES))
def conversation(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    """The same multiply conversation, once per message shape."""
    return SHAPES[request.param]
