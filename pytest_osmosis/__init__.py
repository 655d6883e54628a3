"""pytest-osmosis: dataset rows as pytest items, rollouts run concurrently, rewards asserted.

The plugin registers itself through the ``pytest11`` entry point (``pytest_osmosis.plugin``);
users rarely import this package. What they may want to name in their own code:
:class:`RunResult` (what the ``osmosis_run`` fixture returns) and :class:`DatasetMarker`
(the parsed arguments of ``@pytest.mark.osmosis_dataset``).
"""

from osmosis_rollout import __version__
from pytest_osmosis.fixtures import DatasetMarker, RunResult

__all__ = ["DatasetMarker", "RunResult", "__version__"]
