#!/usr/bin/env bash
# Run the whole test suite: sets up .venv (Python 3.11+) on first use, then lint, format, types,
# the virtualenvs some tests use, tests. Extra arguments go to pytest (e.g. a file or -k EXPR).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
echo "== ruff"; .venv/bin/ruff check osmosis_rollout pytest_osmosis tests bench example_rollouts
echo "== ruff format"; .venv/bin/ruff format --check osmosis_rollout pytest_osmosis tests bench example_rollouts
echo "== mypy"; .venv/bin/mypy
# Nothing is installed from inside a test (under its timeout): the venvs from the package index
# (the official SDK's, the distribution's) are built here, bounded and cached in
# ~/.cache/pytest-osmosis; their tests skip, with the reason, where one could not be built.
echo "== test venvs"; .venv/bin/python scripts/build_test_venvs.py
# Two workers per core: about half of the suite's time is spent waiting (subprocess pytest
# runs, servers starting and draining). --dist loadfile keeps a file's tests on one worker, so
# module fixtures (a Ray cluster, servers) are built once, not once per worker.
echo "== pytest"; .venv/bin/python -m pytest -n "$(($(nproc) * 2))" --dist loadfile -q -p no:cacheprovider "$@" || status=$?
if [ "${status:-0}" -eq 5 ]; then
  echo "scripts/test.sh: pytest collected no tests (exit 5): check the files or -k given" >&2
fi
if [ "${status:-0}" -ne 0 ]; then exit "$status"; fi
# The speed shortcuts off (osmosis_rollout/_internal/shortcuts.py): the standard paths they stand in
# for must pass the integration tests too. Only on a whole run, not on a chosen part.
if [ "$#" -eq 0 ]; then
  echo "== pytest tests/integrations, OSMOSIS_NO_SHORTCUTS=1"
  OSMOSIS_NO_SHORTCUTS=1 .venv/bin/python -m pytest tests/integrations -n "$(nproc)" -q -p no:cacheprovider
fi
