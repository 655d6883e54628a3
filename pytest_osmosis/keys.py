"""Typed stash keys and report attributes, in a module light enough for every pytest start-up.

The session itself is a plugin registered as :data:`SESSION_PLUGIN`, not a stash entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from osmosis_rollout.dataset import DatasetRow

SESSION_PLUGIN = "osmosis-session"
"""The name the session plugin is registered under (cheap to test with ``has_plugin``)."""

DATASETS_KEY = pytest.StashKey[set[Path]]()
"""The resolved dataset paths that pytest should collect as row items."""

WORKER_RUN_NAME = "osmosis_run_name"
"""The ``workerinput`` key under which xdist workers get the controller's run name."""


@dataclass(frozen=True)
class RowRef:
    """What an item that runs a dataset row tells the session: the row, its cassette key, and
    the dataset file it came from (``None`` for rows that do not go into the run's report)."""

    row: DatasetRow
    cassette_key: str | None = None
    dataset: str | None = None


ROW_KEY = pytest.StashKey[RowRef]()
"""On a row item's ``stash``: the row it runs (set by the item itself)."""

REPORT_ATTR = "osmosis"
"""The attribute carrying a row's record on its call report (pytest-xdist ships it to the
controller with the report; JUnit XML does not see it)."""

WORD_ATTR = "osmosis_word"
"""The attribute carrying what ``-v`` shows beside a row's outcome (``reward=1.0``)."""


def row_ref(item: pytest.Item) -> RowRef | None:
    """The row ``item`` runs: a dataset row item's, or that of a test parametrized by
    ``@pytest.mark.osmosis_dataset`` that asks for its result; else ``None``."""
    ref = item.stash.get(ROW_KEY, None)
    callspec = getattr(item, "callspec", None)
    if ref is None and callspec and "osmosis_result" in getattr(item, "fixturenames", ()):
        row: DatasetRow | None = callspec.params.get("osmosis_row")
        return RowRef(row) if row is not None else None
    return ref
