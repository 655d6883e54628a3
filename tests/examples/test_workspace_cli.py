"""``osmosis-rollout templates``, ``init`` and ``validate``: a new rollout from nothing to green."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from examples.support import (
    assert_all_rows_passed,
    count_rows,
    run_cli,
    run_pytest,
)

from osmosis_rollout.cli import main
from osmosis_rollout.templates import TEMPLATES, template_targets

pytestmark = pytest.mark.timeout(600)

GOOD_TOML = """\
[experiment]
rollout = "calc"
entrypoint = "main.py"
model_path = "openai/gpt-5-mini"
dataset = "calc"
"""


def init(workspace: Path, name: str, template: str = "plain") -> int:
    return main(["init", "--template", template, "--dir", str(workspace), "--", name])


def test_templates_lists_every_template_with_a_description(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["templates"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "multiply-openai",
        "multiply-strands",
        "plain",
        "judge",
    ]
    for line, template in zip(lines, TEMPLATES.values(), strict=True):
        assert template.description in line
        assert f'pip install "pytest-osmosis[{template.extra}]"' in line


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_init_writes_the_rollout_its_policy_eval_config_and_a_dataset(
    template: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc", template) == 0
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == sorted(str(rel) for rel in template_targets("calc"))
    assert written == sorted(
        [
            "rollouts/calc/main.py",
            "rollouts/calc/policy.py",
            "configs/eval/calc.toml",
            "data/calc.jsonl",
        ]
    )
    assert count_rows(tmp_path / "data" / "calc.jsonl") >= 4
    assert 'rollout = "calc"' in (tmp_path / "configs/eval/calc.toml").read_text()
    assert "{{name}}" not in (tmp_path / "rollouts/calc/main.py").read_text()
    out = capsys.readouterr().out
    assert "pytest --osmosis-dataset data/calc.jsonl" in out


def test_init_defaults_to_the_current_directory_and_keeps_other_rollouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "first"]) == 0
    assert main(["init", "second", "--template", "judge"]) == 0
    assert (tmp_path / "rollouts/first/main.py").is_file()
    assert (tmp_path / "rollouts/second/main.py").is_file()
    assert "OsmosisAgent" in (tmp_path / "rollouts/first/main.py").read_text()


def test_init_refuses_to_overwrite_and_writes_nothing_when_any_target_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "data" / "calc.jsonl"
    existing.parent.mkdir()
    existing.write_text("mine\n")
    assert init(tmp_path, "calc") == 2
    err = capsys.readouterr().err
    assert "refusing to overwrite 1 existing file(s)" in err
    assert str(existing) in err
    assert existing.read_text() == "mine\n"
    assert not (tmp_path / "rollouts").exists()
    assert not (tmp_path / "configs").exists()


def test_init_a_second_time_lists_every_existing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc") == 0
    before = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert init(tmp_path, "calc", "judge") == 2
    err = capsys.readouterr().err
    assert "refusing to overwrite 4 existing file(s)" in err
    for rel in template_targets("calc"):
        assert str(tmp_path / rel) in err
    assert {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("name", ["Calc", "a/b", "..", "-calc", "my rollout", "calc.v2", ""])
def test_init_rejects_a_name_that_is_not_one_lowercase_segment(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, name) == 2
    assert "invalid rollout name" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_init_rejects_an_unknown_template_with_the_choices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        init(tmp_path, "calc", "langchain")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'langchain'" in err and "multiply-strands" in err


def test_validate_passes_a_fresh_rollout_and_prints_one_line_per_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc") == 0
    capsys.readouterr()
    code = main(
        [
            "validate",
            "--dataset",
            str(tmp_path / "data/calc.jsonl"),
            "--config",
            str(tmp_path / "configs/eval/calc.toml"),
            str(tmp_path / "rollouts/calc/main.py"),
        ]
    )
    out = capsys.readouterr().out.splitlines()
    assert code == 0, out
    assert out[0].startswith("ok    dataset[") and "valid prompt dataset, 8 row(s)" in out[0]
    assert out[1].startswith("ok    eval-config[") and "rollout 'calc'" in out[1]
    assert out[2].startswith("ok    entrypoint[")
    assert "workflow MultiplyWorkflow, grader MultiplyGrader" in out[2]
    assert out[3] == "all 3 check(s) passed"


def test_validate_without_arguments_checks_the_workspace_in_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc") == 0
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["validate"]) == 0
    out = capsys.readouterr().out
    assert "ok    dataset[data/calc.jsonl]" in out
    assert "ok    eval-config[configs/eval/calc.toml]" in out
    assert "ok    entrypoint[rollouts/calc/main.py]" in out


def test_validate_with_nothing_to_check_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["validate"]) == 2
    assert "nothing to validate" in capsys.readouterr().err


def test_validate_reports_a_bad_dataset_with_the_row_column_and_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        "".join(json.dumps({"user_prompt": f"q{i}", "answer": "x"}) + "\n" for i in range(4))
    )
    assert main(["validate", "--dataset", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"error dataset[{bad}]:" in out
    assert "column 'ground_truth'" in out
    assert "fix:" in out
    assert out.rstrip().endswith("1 of 1 check(s) failed")


def test_validate_reports_a_missing_dataset_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main(["validate", "--dataset", str(missing)]) == 1
    assert f"error dataset[{missing}]: file not found" in capsys.readouterr().out


def test_validate_reports_every_problem_of_a_bad_eval_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[experiment]\nrollout = "calc"\nmodle_path = "x"\n\n[evalution]\n')
    assert main(["validate", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert f"error eval-config[{config}]:" in out
    assert "experiment.entrypoint: is required" in out
    assert "did you mean 'model_path'?" in out
    assert "evalution" in out


def test_validate_submit_requires_the_secrets_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "calc.toml"
    config.write_text(GOOD_TOML)
    assert main(["validate", "--config", str(config)]) == 0
    assert main(["validate", "--submit", "--config", str(config)]) == 1
    assert "secrets: section is required to submit an eval" in capsys.readouterr().out


def test_validate_reports_an_entrypoint_that_fails_to_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = tmp_path / "rollouts" / "broken" / "main.py"
    entry.parent.mkdir(parents=True)
    entry.write_text("import not_a_module_anywhere\n")
    assert main(["validate", str(entry)]) == 1
    out = capsys.readouterr().out
    assert f"error entrypoint[{entry}]:" in out
    assert "ModuleNotFoundError" in out and "not_a_module_anywhere" in out


def test_validate_reports_a_workflow_without_a_grader(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = tmp_path / "main.py"
    entry.write_text(
        "from osmosis_rollout import AgentWorkflow\n\n"
        "class Only(AgentWorkflow):\n"
        "    async def run(self, ctx):\n"
        "        return None\n"
    )
    assert main(["validate", str(entry)]) == 1
    out = capsys.readouterr().out
    assert "defines a workflow but no Grader subclass" in out
    assert "fix: define one Grader subclass" in out


def test_validate_reports_a_missing_entrypoint_and_still_runs_the_other_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc") == 0
    capsys.readouterr()
    missing = tmp_path / "rollouts/other/main.py"
    code = main(["validate", "--dataset", str(tmp_path / "data/calc.jsonl"), str(missing)])
    out = capsys.readouterr().out
    assert code == 1
    assert "ok    dataset[" in out
    assert f"error entrypoint[{missing}]: entrypoint file not found" in out
    assert "1 of 2 check(s) failed" in out


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_init_then_validate_then_pytest_passes_for_every_template(
    template: str, tmp_path: Path
) -> None:
    name = f"new-{template}"
    created = run_cli(tmp_path, "init", name, "--template", template)
    assert created.returncode == 0, created.explain()
    validated = run_cli(tmp_path, "validate")
    assert validated.returncode == 0, validated.explain()
    lines = validated.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["ok", "ok", "ok", "all"], validated.explain()
    ran = run_pytest(
        tmp_path,
        "--osmosis-dataset",
        f"data/{name}.jsonl",
        "--osmosis-policy",
        f"rollouts/{name}/policy.py:policy",
    )
    assert_all_rows_passed(ran, count_rows(tmp_path / "data" / f"{name}.jsonl"))
