"""Both SDKs in one environment: the official ``osmosis-ai`` 0.3.8 and this package, each with
its framework extras, resolve together from the package index and import side by side.

One virtualenv (Python >= 3.12, the official SDK's floor) gets
``osmosis-ai[openai-agents,strands,rubric]==0.3.8`` and ``pytest-osmosis[openai-agents,strands,
litellm]`` in a single ``pip install``. A set of requirements that resolves has every subset
resolve too, so this also shows ``pip install "osmosis-ai[openai-agents]==0.3.8"
".[openai-agents]"`` and the Strands and LiteLLM pairs resolve (``rubric`` is the official
extra that asks for LiteLLM alone). Nothing is pinned: this is what a user gets from the index
today. Skipped, with the reason, without a Python >= 3.12 or without the index. The
environment takes about a minute to build: it is built once, and the suite runs with
``--dist loadfile`` so that this file's tests share one xdist worker.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from _support.repo import fresh_copy
from _support.venvs import (
    PIP_TIMEOUT,
    create_venv,
    find_python312,
    pip_install,
    require_package_index,
    run,
)

pytestmark = pytest.mark.pip_index

OFFICIAL = "osmosis-ai[openai-agents,strands,rubric]==0.3.8"
OURS_EXTRAS = "openai-agents,strands,litellm"

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
def shared(tmp_path_factory: pytest.TempPathFactory) -> Shared:
    python312 = find_python312()
    if python312 is None:
        pytest.skip("osmosis-ai 0.3.8 needs Python >= 3.12 and none was found")
    require_package_index()
    root = tmp_path_factory.mktemp("side-by-side")
    source = fresh_copy(root / "source")
    python = create_venv(root / "venv", python312)
    installed = pip_install(python, OFFICIAL, f"{source}[{OURS_EXTRAS}]")
    assert installed.returncode == 0, installed.explain()
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


@pytest.mark.timeout(PIP_TIMEOUT + 300)
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
    )
    assert imported.returncode == 0, (
        f"{framework} {shared.versions[framework]} is shared by both SDKs\n" + imported.explain()
    )
