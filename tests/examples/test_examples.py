"""Each example workspace is complete and passes under the plugin, in-process and served."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from examples.support import (
    EXAMPLES,
    assert_all_rows_passed,
    copy_example,
    count_rows,
    read_report,
    run_cli,
    run_pytest,
)

from osmosis_rollout.dataset import validate_dataset
from osmosis_rollout.templates.__main__ import differences, write
from osmosis_rollout.workspace.eval_config import load_eval_config

pytestmark = pytest.mark.timeout(600)


def test_every_example_has_the_official_workspace_layout(example: str) -> None:
    root = EXAMPLES / example
    for rel in (
        f"rollouts/{example}/main.py",
        f"rollouts/{example}/policy.py",
        f"rollouts/{example}/pyproject.toml",
        f"configs/eval/{example}.toml",
        f"configs/training/{example}.toml",
        "data/test.jsonl",
        "pyproject.toml",
        "README.md",
    ):
        assert (root / rel).is_file(), f"{example} lacks {rel}"


def test_the_committed_examples_are_a_fresh_render_of_the_templates() -> None:
    found = differences(EXAMPLES)
    assert not found, (
        "example_rollouts/ differs from its templates (edit osmosis_rollout/templates/, then "
        "run `python -m osmosis_rollout.templates example_rollouts`):\n" + "\n".join(found)
    )


def test_the_check_reports_an_edited_example(tmp_path: Path) -> None:
    copy = tmp_path / "examples"
    write(copy)
    assert differences(copy) == []
    edited = copy / "judge" / "rollouts" / "judge" / "main.py"
    edited.write_text(edited.read_text() + "# edited by hand\n")
    (copy / "judge" / "notes.txt").write_text("mine")
    assert differences(copy) == [
        f"differs: {edited}",
        f"not rendered: {copy / 'judge' / 'notes.txt'}",
    ]


def test_every_example_validates_as_a_workspace(example: str) -> None:
    result = run_cli(EXAMPLES / example, "validate", "--submit")
    assert result.returncode == 0, result.explain()
    assert "error" not in result.stdout, result.explain()


def test_every_example_dataset_and_eval_config_pass_the_submit_rules(example: str) -> None:
    root = EXAMPLES / example
    report = validate_dataset(root / "data" / "test.jsonl")
    assert report.ok and not report.warnings, report.format()
    assert report.n_rows >= 6
    config = load_eval_config(root / "configs" / "eval" / f"{example}.toml", require_secrets=True)
    assert config.experiment.rollout == example
    assert config.experiment.dataset == "test"  # data/test.jsonl, where the ini points
    assert config.entrypoint_path(root).is_file()
    assert config.evaluation.pass_threshold == 1.0


def test_every_example_pyproject_runs_its_dataset_with_its_reference_policy(example: str) -> None:
    with (EXAMPLES / example / "pyproject.toml").open("rb") as handle:
        pyproject = tomllib.load(handle)
    ini = pyproject["tool"]["pytest"]["ini_options"]
    assert ini["osmosis_dataset"] == ["data/test.jsonl"]
    assert ini["osmosis_policy"] == f"rollouts/{example}/policy.py:policy"
    (dependency,) = pyproject["project"]["dependencies"]
    assert dependency.startswith("pytest-osmosis[")


def test_a_bare_pytest_in_an_example_runs_every_row_in_process(
    example: str, tmp_path: Path
) -> None:
    workspace = copy_example(example, tmp_path)
    rows = count_rows(workspace / "data" / "test.jsonl")
    result = run_pytest(workspace)
    assert_all_rows_passed(result, rows)
    assert "osmosis: in-process" in result.stdout
    report = read_report(workspace)
    summary = report["summary"]
    assert isinstance(summary, dict)
    assert summary["passed"] == rows and summary["pass_rate"] == 1.0


def test_an_example_passes_in_server_mode_against_its_own_served_entrypoint(
    example: str, tmp_path: Path
) -> None:
    workspace = copy_example(example, tmp_path)
    rows = count_rows(workspace / "data" / "test.jsonl")
    result = run_pytest(
        workspace,
        "--osmosis-dataset",
        "data/test.jsonl",
        "--osmosis-policy",
        f"rollouts/{example}/policy.py:policy",
        "--osmosis-serve",
    )
    assert_all_rows_passed(result, rows)
    assert "osmosis: server" in result.stdout


def test_the_judge_example_records_the_offline_judges_verdict(tmp_path: Path) -> None:
    workspace = copy_example("judge", tmp_path)
    result = run_pytest(workspace, "--osmosis-rows", "0")
    assert result.returncode == 0, result.explain()
    report = read_report(workspace)
    (row,) = report["rows"]  # type: ignore[misc]
    trajectory = Path(row["trajectory_filename"]).read_text(encoding="utf-8")
    assert "reference_verdict" in trajectory
    assert "computed with the 9/5 + 32 formula" in trajectory


def test_an_answer_without_working_gets_half_credit_from_the_judge(tmp_path: Path) -> None:
    workspace = copy_example("judge", tmp_path)
    (workspace / "terse.py").write_text(
        "def policy(request):\n    return 'It is 212 degrees Fahrenheit.'\n", encoding="utf-8"
    )
    result = run_pytest(workspace, "--osmosis-rows", "0", "--osmosis-policy", "terse.py:policy")
    assert result.returncode == 1, result.explain()
    assert "reward 0.5 < threshold 1" in result.stdout, result.explain()


def test_the_hard_rows_fail_with_the_label_and_the_wrong_answer(tmp_path: Path) -> None:
    workspace = copy_example("multiply-openai", tmp_path)
    result = run_pytest(workspace, "--osmosis-dataset", "data/hard.jsonl")
    assert result.returncode == 1, result.explain()
    assert re.search(r"^rows: 4\s+passed: 1\s+failed: 3\b", result.stdout, re.M), result.explain()
    for line in (
        "hard-2 (hard.jsonl line 2): reward 0 < threshold 1",
        "  label: 24",
        "  last assistant message: The product is 6.",
        "hard-4 (hard.jsonl line 4): reward 0 < threshold 1",
        "  last assistant message: The product is 0.",
    ):
        assert line in result.stdout, result.explain()
