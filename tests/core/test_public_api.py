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
    "osmosis_rollout.agent_workflow": ["AgentWorkflow", "AgentWorkflowConfig"],
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


def test_a_protocol_error_is_a_runtime_error_built_as_the_officials() -> None:
    import pickle

    from osmosis_rollout.client import RolloutProtocolError

    error = RolloutProtocolError("GET /health answered 502", status_code=502)
    assert isinstance(error, RuntimeError)
    assert (str(error), error.status_code) == ("GET /health answered 502", 502)
    with pytest.raises(TypeError):
        RolloutProtocolError("no status")  # type: ignore[call-arg]
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.status_code) == (RolloutProtocolError, str(error), 502)


def test_backend_cancel_rollouts_is_a_plain_method_with_positional_selectors() -> None:
    import inspect

    from osmosis_rollout import ExecutionBackend

    method = ExecutionBackend.cancel_rollouts
    assert not inspect.iscoroutinefunction(method)
    parameters = inspect.signature(method).parameters
    assert [(name, p.kind) for name, p in parameters.items()][1:] == [
        (name, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in ("ids", "prefix", "all")
    ]


def test_save_trajectory_is_a_coroutine_function_with_the_official_keywords() -> None:
    import inspect

    from osmosis_rollout.trajectory import save_trajectory

    assert inspect.iscoroutinefunction(save_trajectory)
    parameters = inspect.signature(save_trajectory).parameters
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert list(parameters) == [
        "rollout_id",
        "result",
        "request_label",
        "request_metadata",
        "request_extra_fields",
        "report",
        "artifact_root",
        "diagnostics",
    ]
