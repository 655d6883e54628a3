"""osmosis_rollout.workspace.user_code and osmosis_rollout.workspace: importing user files, finding a workspace's parts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from osmosis_rollout.errors import EntrypointError
from osmosis_rollout.workspace import (
    config_workspace,
    dataset_candidates,
    eval_config_for,
    find_local_dataset,
    find_workspace,
    rollout_name,
    workspace_files,
)
from osmosis_rollout.workspace.user_code import import_user_file, load_object


@pytest.fixture(autouse=True)
def _restore_sys_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing user files puts their folder on sys.path on purpose; undo it after each test."""
    monkeypatch.setattr(sys, "path", sys.path[:])


def test_a_file_is_imported_once_and_its_relative_imports_work(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("VALUE = 'helper'\n")
    (tmp_path / "main.py").write_text("from .helpers import VALUE\nCOUNT = [0]\nCOUNT[0] += 1\n")
    first = import_user_file(tmp_path / "main.py")
    again = import_user_file(tmp_path / "main.py")
    assert first is again and first.COUNT == [1]
    assert first.VALUE == "helper"


def test_a_module_that_raises_is_not_left_half_imported(tmp_path: Path) -> None:
    path = tmp_path / "main.py"
    path.write_text("raise ValueError('boom')\n")
    for _ in range(2):  # the second import runs the module again instead of a cached stub
        with pytest.raises(ValueError, match="boom"):
            import_user_file(path)


def test_load_object_names_the_module_and_what_it_defines(tmp_path: Path) -> None:
    (tmp_path / "policy.py").write_text("def policy(request):\n    return 'x'\n")
    assert load_object("policy.py:policy", base_dir=tmp_path)(None) == "x"
    with pytest.raises(
        EntrypointError, match=r"'policy\.py' has no attribute 'nope'; it defines: policy"
    ):
        load_object("policy.py:nope", base_dir=tmp_path)
    with pytest.raises(EntrypointError, match=r"file not found: .*missing\.py"):
        load_object("missing.py:policy", base_dir=tmp_path)
    with pytest.raises(EntrypointError, match="expected MODULE_OR_FILE:NAME"):
        load_object("policy.py", base_dir=tmp_path)


def test_the_workspace_is_the_nearest_folder_with_rollouts(tmp_path: Path) -> None:
    (tmp_path / "rollouts" / "calc").mkdir(parents=True)
    deep = tmp_path / "data" / "more"
    deep.mkdir(parents=True)
    assert find_workspace([deep]) == tmp_path
    assert (
        find_workspace([tmp_path.parent]) is None or find_workspace([tmp_path.parent]) != tmp_path
    )


def test_a_configs_workspace_is_three_levels_up_or_the_nearest_rollouts_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "rollouts").mkdir()
    assert config_workspace(tmp_path / "configs" / "eval" / "x.toml") == tmp_path
    assert config_workspace(tmp_path / "configs" / "training" / "x.toml") == tmp_path
    assert config_workspace(tmp_path / "x.toml") == tmp_path


def test_the_eval_config_of_a_rollout_is_found_by_its_folder_name(tmp_path: Path) -> None:
    (tmp_path / "configs" / "eval").mkdir(parents=True)
    (tmp_path / "configs" / "eval" / "calc.toml").write_text("")
    assert rollout_name("rollouts/calc/main.py:app") == "calc"
    assert eval_config_for(tmp_path, "rollouts/calc/main.py") == tmp_path / "configs/eval/calc.toml"
    assert eval_config_for(tmp_path, "rollouts/other/main.py") is None
    assert eval_config_for(None, "rollouts/calc/main.py") is None


def test_a_dataset_name_is_looked_up_under_data_and_a_path_as_a_path(tmp_path: Path) -> None:
    assert dataset_candidates("gsm8k", workspace=tmp_path) == [
        tmp_path / "data" / "gsm8k.jsonl",
        tmp_path / "data" / "gsm8k.csv",
        tmp_path / "data" / "gsm8k.parquet",
    ]
    assert find_local_dataset("gsm8k", workspace=tmp_path) is None
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "gsm8k.csv").write_text("user_prompt,ground_truth\n")
    assert find_local_dataset("gsm8k", workspace=tmp_path) == tmp_path / "data" / "gsm8k.csv"
    base = tmp_path / "elsewhere"
    base.mkdir()
    (base / "rows.jsonl").write_text("")
    assert find_local_dataset("rows.jsonl", workspace=tmp_path, base=base) == base / "rows.jsonl"


def test_workspace_files_lists_each_kind_sorted(tmp_path: Path) -> None:
    for rel in (
        "rollouts/b/main.py",
        "rollouts/a/main.py",
        "rollouts/a/helpers.py",
        "configs/eval/a.toml",
        "configs/training/a.toml",
        "data/x.jsonl",
        "data/y.csv",
        "data/notes.txt",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    entrypoints, evals, trainings, datasets = workspace_files(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in entrypoints] == [
        "rollouts/a/main.py",
        "rollouts/b/main.py",
    ]
    assert [p.name for p in evals] == ["a.toml"] and [p.name for p in trainings] == ["a.toml"]
    assert [p.name for p in datasets] == ["x.jsonl", "y.csv"]
