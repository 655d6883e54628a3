"""Shared fixtures for the project's own tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _artifact_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep every rollout's artifacts under the test's tmp dir, never in ~/.osmosis."""
    root = tmp_path / "artifact-root"
    monkeypatch.setenv("_OSMOSIS_ROLLOUT_ARTIFACT_ROOT", str(root))
    return root
