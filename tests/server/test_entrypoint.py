"""load_entrypoint: each resolution rule and each error message."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from osmosis_rollout import LocalBackend
from osmosis_rollout.errors import EntrypointError
from osmosis_rollout.workspace.entrypoint import discover_entrypoints, load_entrypoint

HEADER = """
from osmosis_rollout import AgentWorkflow, Grader, AgentWorkflowConfig, GraderConfig, LocalBackend

class Echo(AgentWorkflow):
    async def run(self, ctx):
        return [{"role": "assistant", "content": "x"}]
"""


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Entrypoint loading puts directories on sys.path on purpose; undo it after each test."""
    monkeypatch.setattr(sys, "path", sys.path[:])


def write(tmp_path: Path, body: str, name: str = "main.py") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(HEADER) + textwrap.dedent(body))
    return path


def test_classes_rule_builds_a_local_backend_with_grader_and_configs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        class Judge(Grader):
            async def grade(self, ctx):
                ctx.set_reward(1.0)

        workflow_config = AgentWorkflowConfig(name="w")
        grader_config = GraderConfig(name="g")
        """,
    )
    loaded = load_entrypoint(str(path))
    assert loaded.found == "classes"
    assert loaded.workflow is not None and loaded.workflow.__name__ == "Echo"
    assert loaded.grader is not None and loaded.grader.__name__ == "Judge"
    assert loaded.workflow_config is not None and loaded.workflow_config.name == "w"
    assert loaded.grader_config is not None and loaded.grader_config.name == "g"
    assert isinstance(loaded.backend, LocalBackend)
    assert loaded.app is None


def test_a_module_level_app_wins_over_backends_and_classes(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        from osmosis_rollout.server import create_rollout_server
        backend = LocalBackend(workflow=Echo)
        app = create_rollout_server(backend=backend, configure_logging=False)
        """,
    )
    loaded = load_entrypoint(str(path))
    assert loaded.found == "app"
    assert loaded.app is not None
    assert loaded.backend is loaded.module.backend


def test_a_module_level_backend_wins_over_classes(tmp_path: Path) -> None:
    path = write(tmp_path, "backend = LocalBackend(workflow=Echo)\n")
    loaded = load_entrypoint(str(path))
    assert loaded.found == "backend"
    assert loaded.backend is loaded.module.backend


def test_an_explicit_attr_wins_over_everything(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        class Other(AgentWorkflow):
            async def run(self, ctx):
                return []
        backend = LocalBackend(workflow=Echo)
        """,
    )
    loaded = load_entrypoint(f"{path}:Other")
    assert loaded.found == "attr"
    assert loaded.workflow is not None and loaded.workflow.__name__ == "Other"
    assert load_entrypoint(f"{path}:backend").backend is loaded.module.backend


def test_explicit_attr_may_name_an_app(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        from osmosis_rollout.server import create_rollout_server
        server = create_rollout_server(backend=LocalBackend(workflow=Echo), configure_logging=False)
        """,
    )
    loaded = load_entrypoint(f"{path}:server")
    assert loaded.found == "attr" and loaded.app is loaded.module.server


def test_two_workflows_without_attr_name_both_and_suggest_one(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        class Second(AgentWorkflow):
            async def run(self, ctx):
                return []
        """,
    )
    with pytest.raises(EntrypointError) as info:
        load_entrypoint(str(path))
    assert str(info.value) == (
        f"{path}: found 2 AgentWorkflow subclasses: Echo, Second; pass {path}:Echo"
    )


def test_two_graders_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        class A(Grader):
            async def grade(self, ctx): ...
        class B(Grader):
            async def grade(self, ctx): ...
        """,
    )
    with pytest.raises(EntrypointError, match="found 2 Grader subclasses: A, B"):
        load_entrypoint(str(path))


def test_two_backends_are_refused_with_their_names(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "b1 = LocalBackend(workflow=Echo)\nb2 = LocalBackend(workflow=Echo)\n",
    )
    with pytest.raises(
        EntrypointError, match=r"found 2 ExecutionBackend instances: b1, b2; pass .*:b1"
    ):
        load_entrypoint(str(path))


def test_classes_imported_from_helper_modules_beside_main_are_found(tmp_path: Path) -> None:
    # A package name no other test imports: the Ray tests' rollout has a ``helpers`` module.
    helpers = tmp_path / "echo_helpers"
    helpers.mkdir()
    (helpers / "__init__.py").write_text("")
    (helpers / "flow.py").write_text(textwrap.dedent(HEADER))
    (tmp_path / "grading.py").write_text(
        "from osmosis_rollout import Grader\n\n"
        "class Judge(Grader):\n"
        "    async def grade(self, ctx):\n"
        "        ctx.set_reward(1.0)\n"
    )
    path = tmp_path / "main.py"
    path.write_text("from echo_helpers.flow import Echo\nfrom .grading import Judge\n")
    loaded = load_entrypoint(str(path))
    assert loaded.found == "classes"
    assert loaded.workflow is not None and loaded.workflow.__name__ == "Echo"
    assert loaded.grader is not None and loaded.grader.__name__ == "Judge"


def test_classes_imported_from_outside_the_rollout_folder_do_not_count(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "libflow.py").write_text(textwrap.dedent(HEADER))
    sys.path.insert(0, str(site))
    path = tmp_path / "rollout" / "main.py"
    path.parent.mkdir()
    path.write_text("from libflow import Echo\nx = 1\n")
    with pytest.raises(EntrypointError) as info:
        load_entrypoint(str(path))
    assert "found no FastAPI app, ExecutionBackend or AgentWorkflow subclass" in str(info.value)
    assert "create_rollout_server" in str(info.value)


def test_sibling_imports_work_because_the_directory_is_on_sys_path(tmp_path: Path) -> None:
    (tmp_path / "helpers_for_entrypoint.py").write_text("ANSWER = 'sibling'\n")
    path = write(tmp_path, "from helpers_for_entrypoint import ANSWER\n")
    loaded = load_entrypoint(str(path))
    assert loaded.module.ANSWER == "sibling"
    assert sys.path[0] == str(tmp_path.resolve())


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(EntrypointError, match=r"entrypoint file not found: .*nope\.py"):
        load_entrypoint(str(tmp_path / "nope.py"))


def test_an_import_error_inside_the_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "main.py"
    path.write_text("raise RuntimeError('bad config')\n")
    with pytest.raises(
        EntrypointError, match=r"importing .*main.py failed: RuntimeError: bad config"
    ):
        load_entrypoint(str(path))


def test_a_missing_attr_lists_what_was_found(tmp_path: Path) -> None:
    path = write(tmp_path, "")
    with pytest.raises(EntrypointError) as info:
        load_entrypoint(f"{path}:Nope")
    assert str(info.value) == (
        f"{path} has no attribute 'Nope' (found AgentWorkflow subclasses: Echo)"
    )


def test_an_attr_of_the_wrong_kind_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "number = 3\n")
    with pytest.raises(EntrypointError, match=r":number is a int; expected a FastAPI app"):
        load_entrypoint(f"{path}:number")


def test_a_dotted_module_spec_is_imported(tmp_path: Path) -> None:
    package = tmp_path / "my_rollout_pkg"
    write(package, "backend = LocalBackend(workflow=Echo)\n", name="entry.py")
    (package / "__init__.py").write_text("")
    loaded = load_entrypoint("my_rollout_pkg.entry", base_dir=tmp_path)
    assert loaded.found == "backend"
    assert loaded.path == "my_rollout_pkg.entry"


def test_an_unknown_module_is_reported(tmp_path: Path) -> None:
    with pytest.raises(EntrypointError, match="neither a file nor an importable module"):
        load_entrypoint("no_such_module_xyz", base_dir=tmp_path)


def test_a_relative_path_resolves_against_base_dir(tmp_path: Path) -> None:
    write(tmp_path / "rollouts" / "demo", "", name="main.py")
    loaded = load_entrypoint("rollouts/demo/main.py", base_dir=tmp_path)
    assert loaded.found == "classes"


def test_an_empty_spec_is_refused() -> None:
    with pytest.raises(EntrypointError, match="empty entrypoint"):
        load_entrypoint("  ")


def test_discover_entrypoints_lists_rollouts_main_files_sorted(tmp_path: Path) -> None:
    for name in ("zeta", "alpha"):
        write(tmp_path / "rollouts" / name, "")
    (tmp_path / "rollouts" / "no_main").mkdir()
    found = discover_entrypoints(tmp_path)
    assert found == [
        tmp_path / "rollouts" / "alpha" / "main.py",
        tmp_path / "rollouts" / "zeta" / "main.py",
    ]
