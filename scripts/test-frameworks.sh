#!/usr/bin/env bash
# The framework integrations at the lowest releases pyproject.toml allows (openai-agents,
# strands-agents, litellm, mcp): installs them in .venv-lowest on first use, pinned by
# constraints-lowest.txt, and runs the tests that use the frameworks there. The newest releases
# are the ones .venv holds (constraints.txt), which scripts/test.sh runs the whole suite on.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Its own venv with its own pip, independent of .venv: CI runs it alongside the main jobs.
venv=.venv-lowest
stamp="$venv/.installed-$(cat pyproject.toml constraints-lowest.txt | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
    rm -rf "$venv"
    "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -c constraints-lowest.txt -e ".[openai-agents,strands,test]"
    touch "$stamp"
fi
echo "== pytest, lowest framework releases: $("$venv/bin/python" -c 'import importlib.metadata as m
print(" ".join(f"{n}=={m.version(n)}" for n in ("openai-agents", "strands-agents", "litellm", "mcp")))')"
# test_lean_endpoint.py is left out here: it pins our lean endpoint client to the request bytes
# of the LiteLLM release in constraints.txt, and older LiteLLM releases serialise differently.
"$venv/bin/python" -m pytest -n 2 -q -p no:cacheprovider \
    --ignore=tests/integrations/test_lean_endpoint.py \
    tests/integrations tests/policy tests/trajectory/test_trajectory_frameworks.py "$@"
