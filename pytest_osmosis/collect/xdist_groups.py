"""pytest-xdist integration: one run directory, and every worker gets its rows up front.

xdist's default ``load`` mode hands items out in small batches, starving each worker's
scheduler of rows to run concurrently; so under it, dataset rows go in one chunk per worker
(a stable hash of the node id) with ``LoadScope`` scheduling; other tests keep their modules.
"""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from pytest_osmosis.keys import DATASETS_KEY, WORKER_RUN_NAME


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """A row-chunking ``LoadScopeScheduling`` when datasets run under the default ``--dist``."""
    if DATASETS_KEY not in config.stash or config.getoption("dist", "load") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    datasets = {str(p) for p in config.stash[DATASETS_KEY]}
    rootpath = str(config.rootpath)

    class RowChunkScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """Dataset rows: ``numnodes`` chunks per file; everything else: its module."""

        def _split_scope(self, nodeid: str) -> str:
            path, inside, _ = nodeid.partition("::")
            if inside and any(d.endswith(path) and d.startswith(rootpath) for d in datasets):
                chunk = zlib.crc32(nodeid.encode()) % max(1, self.numnodes)
                return f"{path}::chunk-{chunk}"
            return str(super()._split_scope(nodeid))

    return RowChunkScheduling(config, log)


def share_run_name(node: Any) -> None:
    """Give workers the controller's run name, so one run writes one directory."""
    from pytest_osmosis.run.session import get_session

    session = get_session(node.config)
    if session is not None:
        node.workerinput[WORKER_RUN_NAME] = session.run_name
