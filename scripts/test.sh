#!/usr/bin/env bash
# Run the whole test suite: sets up .venv (Python 3.11+) on first use, then lint, format, types,
# tests. Extra arguments go to pytest (e.g. a file or -k EXPR to run a part).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
echo "== ruff"; .venv/bin/ruff check osmosis_rollout pytest_osmosis tests bench example_rollouts
echo "== ruff format"; .venv/bin/ruff format --check osmosis_rollout pytest_osmosis tests bench example_rollouts
echo "== mypy"; .venv/bin/mypy
echo "== pytest"; .venv/bin/python -m pytest -n 2 --dist loadgroup -q -p no:cacheprovider "$@"
