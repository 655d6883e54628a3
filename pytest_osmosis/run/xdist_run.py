"""The run across pytest-xdist's processes: which rows it sets out to run, and failed writes.

The controller learns the run's rows from the workers' collection. A worker that cannot write
a file of the run stops and hands the failure to the controller, which ends the run on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_osmosis.keys import DATASETS_KEY

if TYPE_CHECKING:
    from pytest_osmosis.run.row_runner import RunHost

__all__ = ["WRITE_FAILURE_OUTPUT", "XDIST_PLUGIN", "XdistRun"]

XDIST_PLUGIN = "osmosis-xdist"
WRITE_FAILURE_OUTPUT = "osmosis_write_failure"
"""The ``workeroutput`` key carrying a worker's failed write to the controller."""


class XdistRun:
    """pytest-xdist's hooks for the run (registered as ``osmosis-xdist``)."""

    def __init__(self, session: RunHost) -> None:
        self.session = session

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, ids: list[str]) -> None:
        """The first worker's collection names the rows this run sets out to run (before any
        worker gets an item, so before any journals a row)."""
        osmosis = self.session
        if osmosis.selected or not osmosis.settings.active or osmosis.config.option.collectonly:
            return
        datasets = osmosis.config.stash.get(DATASETS_KEY, set())
        root = Path(osmosis.config.rootpath)
        osmosis.set_out(
            [
                nodeid
                for nodeid in ids
                if "::" in nodeid and (root / nodeid.split("::", 1)[0]).resolve() in datasets
            ]
        )

    def pytest_runtest_teardown(self, item: pytest.Item) -> None:
        """On a worker, a file that could not be written stops the worker after this item;
        its controller then stops the others."""
        failure = self.session.folder.write_failure
        if self.session.is_worker and failure is not None and not item.session.shouldstop:
            item.session.shouldstop = failure

    def pytest_sessionfinish(self) -> None:
        """A worker hands its failed write to the controller."""
        osmosis = self.session
        if osmosis.is_worker and osmosis.folder.write_failure is not None:
            osmosis.config.workeroutput[WRITE_FAILURE_OUTPUT] = osmosis.folder.write_failure  # type: ignore[attr-defined]

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any) -> None:
        """The controller takes over a worker's failed write (the run exits 12 on it)."""
        failure = getattr(node, "workeroutput", {}).get(WRITE_FAILURE_OUTPUT)
        if isinstance(failure, str):
            self.session.folder.failed_elsewhere(failure)
