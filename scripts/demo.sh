#!/usr/bin/env bash
# The main job, offline: run the multiply-openai example rollout over its dataset with the
# pytest plugin and its deterministic reference policy (no API key), and print the summary.
# Sets up .venv on first use. Extra arguments go to pytest (e.g. -v, --osmosis-serve).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/_venv.sh
root="$PWD"
cd example_rollouts/multiply-openai
# The example's own pyproject.toml is the pytest config (dataset and policy as ini values),
# so the repository's test settings do not apply. The demo needs no asyncio plugin.
exec "$root/.venv/bin/python" -m pytest -p no:cacheprovider -p no:asyncio \
    --osmosis-dataset data/test.jsonl \
    --osmosis-policy rollouts/multiply-openai/policy.py:policy \
    "$@"
