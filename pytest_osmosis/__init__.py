"""pytest-osmosis: dataset rows as pytest items, rollouts run concurrently, rewards asserted.

The plugin registers itself through ``pytest11`` (``pytest_osmosis.plugin``). Users may name
:class:`RunResult` (what ``osmosis_run`` returns) and :class:`DatasetMarker` (the parsed
arguments of ``@pytest.mark.osmosis_dataset``).
"""

from osmosis_rollout import __version__
from pytest_osmosis.fixtures import DatasetMarker, RunResult

__all__ = ["DatasetMarker", "RunResult", "__version__"]
