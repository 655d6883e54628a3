"""``python -m osmosis_rollout.cli`` runs the ``osmosis-rollout`` command."""

import sys

from osmosis_rollout.cli import main

sys.exit(main())
