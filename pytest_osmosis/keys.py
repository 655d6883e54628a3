"""Typed ``config.stash`` keys, in a module light enough for every pytest start-up to import."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_osmosis.session import OsmosisSession

SESSION_KEY: pytest.StashKey[OsmosisSession] = pytest.StashKey()
"""The session's :class:`~pytest_osmosis.session.OsmosisSession` (present when rows may run)."""

DATASETS_KEY = pytest.StashKey[set[Path]]()
"""The resolved dataset paths that pytest should collect as row items."""

RESULT_KEY = pytest.StashKey[dict[str, Any]]()
"""What ``pytest_sessionfinish`` computed for the terminal summary."""

RECORD_KEY = pytest.StashKey[dict[str, Any]]()
"""A finished row's record, moved onto its call report by the makereport wrapper."""

REPORT_ATTR = "osmosis"
"""The attribute carrying a row's record on its call report (pytest-xdist ships it to the
controller with the report; JUnit XML does not see it)."""
