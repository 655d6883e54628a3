"""Per-rollout artifact directories: layout, retries, the writability marker, the root."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout import (
    AgentWorkflow,
    AgentWorkflowContext,
    ExecutionRequest,
    Grader,
    GraderContext,
    LocalBackend,
    RolloutStatus,
)
from osmosis_rollout.runs import artifacts
from osmosis_rollout.runs.artifacts import (
    ARTIFACT_ROOT_ENV,
    HEALTH_MARKER,
    create_rollout_artifacts_dir,
    default_artifact_root,
)


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries still happen; only the wait between them is shortened."""
    monkeypatch.setattr(artifacts, "CREATE_BACKOFF_SEC", 0.0)


class WritesArtifact(AgentWorkflow[Any]):
    async def run(self, ctx: AgentWorkflowContext[Any]) -> list[dict[str, Any]]:
        assert ctx.metadata is not None
        ctx.metadata["seen"].append(("workflow", ctx.artifacts_dir))
        if ctx.artifacts_dir is not None:
            (ctx.artifacts_dir / "notes.txt").write_text("hello")
        return [{"role": "assistant", "content": "a"}]


class SeesArtifacts(Grader):
    async def grade(self, ctx: GraderContext) -> None:
        assert ctx.metadata is not None
        ctx.metadata["seen"].append(("grader", ctx.artifacts_dir))
        ctx.set_reward(1.0)


async def test_a_rollouts_artifacts_land_under_its_id(_artifact_root: Path) -> None:
    seen: list[tuple[str, Path | None]] = []
    backend = LocalBackend(workflow=WritesArtifact, grader=SeesArtifacts)
    outcome = await backend.execute(
        ExecutionRequest(id="row-7", prompt=[], label="a", metadata={"seen": seen})
    )
    assert outcome.result.status is RolloutStatus.SUCCESS
    expected = _artifact_root / "row-7" / "artifacts"
    assert seen == [("workflow", expected), ("grader", expected)]
    assert (expected / "notes.txt").read_text() == "hello"
    assert (_artifact_root / "row-7" / HEALTH_MARKER).is_file()
    assert not (expected / HEALTH_MARKER).exists()


async def test_a_rollout_runs_with_no_artifacts_dir_when_the_root_is_unusable(
    tmp_path: Path, no_backoff: None
) -> None:
    root_is_a_file = tmp_path / "not-a-dir"
    root_is_a_file.write_text("occupied")
    seen: list[tuple[str, Path | None]] = []
    backend = LocalBackend(
        workflow=WritesArtifact, grader=SeesArtifacts, artifact_root=root_is_a_file
    )
    outcome = await backend.execute(
        ExecutionRequest(id="r", prompt=[], label="a", metadata={"seen": seen})
    )
    assert outcome.result.status is RolloutStatus.SUCCESS
    assert seen == [("workflow", None), ("grader", None)]


async def test_creating_returns_the_artifacts_dir_and_writes_the_marker(tmp_path: Path) -> None:
    directory = await create_rollout_artifacts_dir(tmp_path, "abc")
    assert directory == tmp_path / "abc" / "artifacts"
    assert directory.is_dir()
    assert (tmp_path / "abc" / HEALTH_MARKER).read_text() == "ok\n"


async def test_creation_retries_past_a_transient_mkdir_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_backoff: None
) -> None:
    real_mkdir = os.mkdir
    failures: list[Path] = []

    def flaky_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        if not failures:
            failures.append(Path(path))
            raise OSError("filesystem not ready")
        real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", flaky_mkdir)
    directory = await create_rollout_artifacts_dir(tmp_path, "flaky")
    assert failures == [tmp_path / "flaky"]  # the rollout's directory, made first
    assert directory == tmp_path / "flaky" / "artifacts" and directory.is_dir()


async def test_creation_gives_up_with_none_when_mkdir_always_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_backoff: None
) -> None:
    calls = 0

    def broken_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal calls
        calls += 1
        raise OSError("read-only filesystem")

    monkeypatch.setattr(os, "mkdir", broken_mkdir)
    assert await create_rollout_artifacts_dir(tmp_path, "never") is None
    assert calls == artifacts.CREATE_ATTEMPTS


async def test_creation_returns_none_when_the_dir_cannot_be_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_backoff: None
) -> None:
    # mkdir succeeds but the writability probe cannot be written (root ignores chmod,
    # so the write itself is made to fail).
    real_open = os.open

    def refuse(path: Any, *args: Any, **kwargs: Any) -> int:
        if Path(path).name == HEALTH_MARKER:
            raise PermissionError(f"{path} is read-only")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    assert await create_rollout_artifacts_dir(tmp_path, "r") is None
    assert (tmp_path / "r" / "artifacts").is_dir()
    assert not (tmp_path / "r" / HEALTH_MARKER).exists()


async def test_creation_returns_none_when_the_root_is_a_file(
    tmp_path: Path, no_backoff: None
) -> None:
    root_file = tmp_path / "file-root"
    root_file.write_text("x")
    assert await create_rollout_artifacts_dir(root_file, "r") is None


async def test_a_missing_root_is_made_with_its_parents(tmp_path: Path) -> None:
    root = tmp_path / "not" / "yet"
    directory = await create_rollout_artifacts_dir(root, "first")
    assert directory == root / "first" / "artifacts" and directory.is_dir()
    assert (root / "first" / HEALTH_MARKER).read_text() == "ok\n"


async def test_an_artifacts_path_taken_by_a_file_disables_artifacts(
    tmp_path: Path, no_backoff: None
) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "artifacts").write_text("not a directory")
    assert await create_rollout_artifacts_dir(tmp_path, "r") is None


async def test_a_second_call_keeps_the_existing_marker(tmp_path: Path) -> None:
    await create_rollout_artifacts_dir(tmp_path, "again")
    marker = tmp_path / "again" / HEALTH_MARKER
    marker.write_text("written by the first attempt")
    directory = await create_rollout_artifacts_dir(tmp_path, "again")
    assert directory == tmp_path / "again" / "artifacts"
    assert marker.read_text() == "written by the first attempt"


async def test_readmitting_an_id_reuses_its_directory(_artifact_root: Path) -> None:
    seen: list[tuple[str, Path | None]] = []
    backend = LocalBackend(workflow=WritesArtifact)
    for _ in range(2):
        await backend.execute(
            ExecutionRequest(id="same", prompt=[], metadata={"seen": seen}, grade=False)
        )
    assert seen[0] == seen[1] == ("workflow", _artifact_root / "same" / "artifacts")


def test_the_root_falls_back_to_home_osmosis_when_the_env_is_unset(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(ARTIFACT_ROOT_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_artifact_root() == tmp_path / "home" / ".osmosis"


def test_the_env_override_wins_without_touching_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv(ARTIFACT_ROOT_ENV, str(tmp_path / "override"))
    assert default_artifact_root() == tmp_path / "override"
    assert not (tmp_path / "home").exists()


async def test_local_backend_reads_the_override_at_construction(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(ARTIFACT_ROOT_ENV, str(tmp_path / "at-construction"))
    backend = LocalBackend(workflow=WritesArtifact)
    monkeypatch.setenv(ARTIFACT_ROOT_ENV, str(tmp_path / "changed-later"))
    seen: list[tuple[str, Path | None]] = []
    await backend.execute(ExecutionRequest(id="x", prompt=[], metadata={"seen": seen}, grade=False))
    assert backend.artifact_root == tmp_path / "at-construction"
    assert seen == [("workflow", tmp_path / "at-construction" / "x" / "artifacts")]
    assert not (tmp_path / "changed-later").exists()


def test_an_explicit_artifact_root_beats_the_env(tmp_path: Path) -> None:
    backend = LocalBackend(workflow=WritesArtifact, artifact_root=tmp_path / "explicit")
    assert backend.artifact_root == tmp_path / "explicit"
