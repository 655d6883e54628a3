"""The import paths users migrate to, what they export, and what importing them costs."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

# The official SDK's paths with ``osmosis_ai.rollout`` replaced (design.md's table), and the
# names each must export for a migrated rollout to import unchanged.
PROTOCOL_MODELS = [
    "RolloutInitRequest",
    "RolloutInitResponse",
    "RolloutResultResponse",
    "CancelRolloutsRequest",
    "CancelRolloutsResponse",
    "RolloutLifecycle",
    "POLLING_LEASE_HEADER",
]
TYPES = [
    "AgentWorkflowConfig",
    "GraderConfig",
    "BaseConfig",
    "ConcurrencyConfig",
    "AgentWorkflowOutput",
    "RolloutSample",
    "RolloutStatus",
    "RolloutErrorCategory",
    "ExecutionRequest",
    "ExecutionResult",
    "ExecutionOutcome",
    "MessageDict",
    "Messages",
    *PROTOCOL_MODELS,
]
CONTEXTS = [
    "AgentWorkflowContext",
    "GraderContext",
    "RolloutContext",
    "SampleSource",
    "get_rollout_context",
]
EXPORTS = {
    "osmosis_rollout": [
        "AgentWorkflow",
        "Grader",
        *CONTEXTS,
        *TYPES,
        "ExecutionBackend",
        "LocalBackend",
    ],
    "osmosis_rollout.agent_workflow": ["AgentWorkflow"],
    "osmosis_rollout.grader": ["Grader"],
    "osmosis_rollout.context": [*CONTEXTS, "RolloutProgress", "rollout_contextvar"],
    "osmosis_rollout.types": TYPES,
    "osmosis_rollout.backend": ["ExecutionBackend", "LocalBackend"],
    "osmosis_rollout.backend.base": ["ExecutionBackend"],
    "osmosis_rollout.backend.local": ["LocalBackend"],
}
HEAVY = ["fastapi", "litellm", "agents", "strands", "pyarrow", "pytest", "uvicorn", "openai"]


@pytest.mark.parametrize("module_name", sorted(EXPORTS))
def test_each_migrated_import_path_exports_its_names(module_name: str) -> None:
    module = importlib.import_module(module_name)
    missing = [name for name in EXPORTS[module_name] if not hasattr(module, name)]
    assert missing == []


@pytest.mark.parametrize("module_name", ["osmosis_rollout", "osmosis_rollout.types"])
def test_the_package_all_lists_every_exported_name(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert set(EXPORTS[module_name]) <= set(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)


def test_names_are_the_same_objects_on_every_path() -> None:
    import osmosis_rollout
    from osmosis_rollout.backend.local import LocalBackend
    from osmosis_rollout.context import RolloutContext
    from osmosis_rollout.types import RolloutSample

    assert osmosis_rollout.LocalBackend is LocalBackend
    assert osmosis_rollout.RolloutContext is RolloutContext
    assert osmosis_rollout.RolloutSample is RolloutSample


@pytest.mark.parametrize(
    "statement",
    [
        "import osmosis_rollout",
        "import osmosis_rollout.backend.local, osmosis_rollout.context, osmosis_rollout.types",
        "import osmosis_rollout.client, osmosis_rollout.trajectory, osmosis_rollout.rubric",
        "import osmosis_rollout.dataset, osmosis_rollout.rewards",
    ],
)
def test_importing_the_runtime_loads_no_heavy_or_test_dependency(statement: str) -> None:
    probe = (
        f"{statement}\n"
        "import json, sys\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.strip().splitlines()[-1]) == []


def test_the_package_ships_a_typing_marker() -> None:
    import osmosis_rollout

    assert osmosis_rollout.__file__ is not None
    assert (Path(osmosis_rollout.__file__).parent / "py.typed").is_file()
