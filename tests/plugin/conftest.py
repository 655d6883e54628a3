"""Fixtures for pytester-driven plugin tests."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from workspaces import MAIN_PY, POLICY_PY, multiply_rows, write_rows


@pytest.fixture
def workspace(pytester: pytest.Pytester) -> Callable[..., Path]:
    """Write rollouts/demo/main.py, policy.py and data/test.jsonl; return the workspace path."""

    def make(
        rows: list[dict[str, Any]] | None = None, *, main: str = MAIN_PY, policy: str = POLICY_PY
    ) -> Path:
        root = pytester.path
        (root / "rollouts" / "demo").mkdir(parents=True, exist_ok=True)
        (root / "rollouts" / "demo" / "main.py").write_text(textwrap.dedent(main), encoding="utf-8")
        (root / "policy.py").write_text(textwrap.dedent(policy), encoding="utf-8")
        write_rows(root / "data" / "test.jsonl", rows if rows is not None else multiply_rows(4))
        return root

    return make


@pytest.fixture(autouse=True)
def _isolated_artifacts(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_ARTIFACT_ROOT", str(pytester.path / ".artifacts"))
    # Runs under test must not append to the job summary of the CI running this suite.
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
