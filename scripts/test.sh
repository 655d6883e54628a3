#!/usr/bin/env bash
# Run the whole test suite: sets up .venv (Python 3.11+) on first use, then lint, format, types,
# tests. Extra arguments go to pytest (e.g. a file or -k EXPR to run a part).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
echo "== ruff"; .venv/bin/ruff check osmosis_rollout pytest_osmosis tests bench example_rollouts
echo "== ruff format"; .venv/bin/ruff format --check osmosis_rollout pytest_osmosis tests bench example_rollouts
echo "== mypy"; .venv/bin/mypy
# Two workers per core: about half of the suite's time is spent waiting (subprocess pytest
# runs, servers starting and draining, pip building venvs). --dist loadfile keeps a file's
# tests on one worker, so module fixtures (a Ray cluster, a venv built from the index) are
# built once, not once per worker.
echo "== pytest"; .venv/bin/python -m pytest -n "$(($(nproc) * 2))" --dist loadfile -q -p no:cacheprovider "$@"
# The speed shortcuts off (osmosis_rollout/_internal/shortcuts.py): the standard paths they stand in
# for must pass the integration tests too. Only on a whole run, not on a chosen part.
if [ "$#" -eq 0 ]; then
  echo "== pytest tests/integrations, OSMOSIS_NO_SHORTCUTS=1"
  OSMOSIS_NO_SHORTCUTS=1 .venv/bin/python -m pytest tests/integrations -n "$(nproc)" -q -p no:cacheprovider
fi
