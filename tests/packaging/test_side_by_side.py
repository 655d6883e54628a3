"""Both SDKs in one environment: the official ``osmosis-ai`` 0.3.8 and this package, each with
its framework extras, resolve together from the package index and import side by side.

One virtualenv (Python >= 3.12, the official SDK's floor) gets
``osmosis-ai[openai-agents,strands,rubric]==0.3.8`` and ``pytest-osmosis[openai-agents,strands,
litellm]`` in a single ``pip install``. A set of requirements that resolves has every subset
resolve too, so this also shows ``pip install "osmosis-ai[openai-agents]==0.3.8"
".[openai-agents]"`` and the Strands and LiteLLM pairs resolve (``rubric`` is the official
extra that asks for LiteLLM alone). Nothing is pinned: this is what a user gets from the index
today (as of the venv's build: it is rebuilt when ``pyproject.toml`` changes). The environment
is built before pytest by ``scripts/test.sh`` (``_support.venvs.SIDE_BY_SIDE``), and the code
imported is the checkout's (``PYTHONPATH``), so a cached venv never tests old code. Skipped,
with the reason, when it could not be built (no Python >= 3.12, no index).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from _support.repo import REPO
from _support.venvs import SIDE_BY_SIDE, run

pytestmark = pytest.mark.pip_index

#: Per framework: the statements that load it through each SDK in the shared environment.
IMPORTS = {
    "openai-agents": (
        "import osmosis_ai.rollout.integrations.agents.openai_agents",
        "import osmosis_rollout.integrations.agents.openai_agents",
    ),
    "strands-agents": (
        "import osmosis_ai.rollout.integrations.agents.strands",
        "import osmosis_rollout.integrations.agents.strands",
    ),
    "litellm": (
        "import osmosis_ai.eval.rubric.engine",
        "from osmosis_rollout.integrations._litellm import import_litellm; import_litellm()",
    ),
}


@dataclass(frozen=True)
class Shared:
    """The environment holding both SDKs, and the framework versions pip chose."""

    python: Path
    versions: dict[str, str]


@pytest.fixture(scope="session")
def shared() -> Shared:
    python = SIDE_BY_SIDE.require()
    probe = run(
        [
            str(python),
            "-c",
            "import importlib.metadata as m, json; "
            f"print(json.dumps({{n: m.version(n) for n in {sorted(IMPORTS)!r}}}))",
        ],
        timeout=60,
    )
    assert probe.returncode == 0, probe.explain()
    return Shared(python, json.loads(probe.stdout))


@pytest.mark.parametrize("framework", sorted(IMPORTS))
def test_both_sdks_install_side_by_side_and_import_their_integration(
    shared: Shared, framework: str
) -> None:
    official, ours = IMPORTS[framework]
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENAI_AGENTS_DISABLE_TRACING": "1"}
    setup = "; ".join(f"os.environ.setdefault({k!r}, {v!r})" for k, v in env.items())
    imported = run(
        [str(shared.python), "-c", f"import os; {setup}; {official}; {ours}"],
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert imported.returncode == 0, (
        f"{framework} {shared.versions[framework]} is shared by both SDKs\n" + imported.explain()
    )
