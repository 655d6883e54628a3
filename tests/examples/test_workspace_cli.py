"""``osmosis-rollout template list|apply``, ``init`` and ``validate``: a new rollout from nothing to green."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from examples.support import (
    Run,
    assert_all_rows_passed,
    count_rows,
    run,
    run_cli,
    run_pytest,
)

from osmosis_rollout.cli import main
from osmosis_rollout.templates import TEMPLATES, run_command, template_targets

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


def written_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.parametrize("command", [["template", "list"], ["templates"]])
def test_template_list_shows_the_official_names_first_and_ours_as_aliases(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(command) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "multiply-local-openai",
        "multiply-local-strands",
        "plain",
        "judge",
    ]
    assert "alias multiply-openai;" in lines[0] and "alias multiply-strands;" in lines[1]
    for line, template in zip(lines, TEMPLATES.values(), strict=True):
        assert template.description in line
        assert f'pip install "pytest-osmosis[{template.extra}]"' in line


def test_template_apply_writes_the_official_layout_named_after_the_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["template", "apply", "multiply-local-openai"]) == 0
    assert written_files(tmp_path) == [
        "configs/eval/multiply-local-openai.toml",
        "configs/training/multiply-local-openai.toml",
        "data/multiply.jsonl",
        "pyproject.toml",
        "rollouts/multiply-local-openai/main.py",
        "rollouts/multiply-local-openai/policy.py",
        "rollouts/multiply-local-openai/pyproject.toml",
    ]
    eval_toml = (tmp_path / "configs/eval/multiply-local-openai.toml").read_text()
    assert 'rollout = "multiply-local-openai"' in eval_toml and 'dataset = "multiply"' in eval_toml
    rollout_pyproject = (tmp_path / "rollouts/multiply-local-openai/pyproject.toml").read_text()
    assert 'dependencies = ["pytest-osmosis[openai-agents]"]' in rollout_pyproject
    out = capsys.readouterr().out
    assert "osmosis eval submit configs/eval/multiply-local-openai.toml" in out
    assert "osmosis train submit configs/training/multiply-local-openai.toml" in out


def test_an_alias_applies_the_official_template(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["template", "apply", "multiply-strands", "--dir", str(tmp_path)]) == 0
    assert (tmp_path / "rollouts/multiply-local-strands/main.py").is_file()
    assert (
        "OsmosisStrandsAgent" in (tmp_path / "rollouts/multiply-local-strands/main.py").read_text()
    )


def test_init_with_a_template_name_applies_that_template_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "multiply-local-strands", "--dir", str(tmp_path)]) == 0
    main_py = (tmp_path / "rollouts/multiply-local-strands/main.py").read_text()
    assert "OsmosisStrandsAgent" in main_py  # the template named, not the default template
    out = capsys.readouterr().out
    assert "'multiply-local-strands' is a template" in out
    assert "osmosis-rollout init NAME --template multiply-local-strands" in out


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_init_writes_the_rollout_its_policy_configs_and_the_dataset_its_config_names(
    template: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc", template) == 0
    dataset = TEMPLATES[template].dataset
    assert written_files(tmp_path) == sorted(
        [*(str(rel) for rel in template_targets("calc", template)), "pyproject.toml"]
    )
    assert written_files(tmp_path) == sorted(
        [
            "pyproject.toml",
            "rollouts/calc/main.py",
            "rollouts/calc/policy.py",
            "rollouts/calc/pyproject.toml",
            "configs/eval/calc.toml",
            "configs/training/calc.toml",
            f"data/{dataset}.jsonl",
        ]
    )
    assert count_rows(tmp_path / "data" / f"{dataset}.jsonl") >= 4
    eval_toml = (tmp_path / "configs/eval/calc.toml").read_text()
    assert 'rollout = "calc"' in eval_toml and f'dataset = "{dataset}"' in eval_toml
    assert "{{" not in "".join(p.read_text() for p in tmp_path.rglob("*") if p.is_file())
    out = capsys.readouterr().out
    assert f"  {run_command('calc', dataset)}\n" in out
    # What main.py tells the user to run is what init printed.
    assert (
        f"    {run_command('calc', dataset)}\n" in (tmp_path / "rollouts/calc/main.py").read_text()
    )


def test_init_defaults_to_the_current_directory_and_keeps_other_rollouts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "first"]) == 0
    assert main(["init", "second", "--template", "judge"]) == 0
    assert main(["init", "third", "--template", "multiply-openai"]) == 0
    assert (tmp_path / "rollouts/first/main.py").is_file()
    assert (tmp_path / "rollouts/second/main.py").is_file()
    assert "OsmosisAgent" in (tmp_path / "rollouts/first/main.py").read_text()
    assert "OsmosisAgent" in (tmp_path / "rollouts/third/main.py").read_text()


def test_init_refuses_to_overwrite_and_writes_nothing_when_any_target_exists(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    existing = tmp_path / "data" / "multiply.jsonl"
    existing.parent.mkdir()
    existing.write_text("mine\n")
    assert init(tmp_path, "calc") == 2
    err = capsys.readouterr().err
    assert "refusing to overwrite 1 existing file(s)" in err
    assert str(existing) in err and "or pass --force" in err
    assert existing.read_text() == "mine\n"
    assert not (tmp_path / "rollouts").exists()
    assert not (tmp_path / "configs").exists()


def test_force_overwrites_and_an_identical_shared_dataset_is_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc") == 0
    (tmp_path / "rollouts/calc/main.py").write_text("edited\n")
    assert main(["init", "calc", "-t", "plain", "--dir", str(tmp_path), "--force"]) == 0
    assert "RolloutChatClient" in (tmp_path / "rollouts/calc/main.py").read_text()
    assert "data/multiply.jsonl (already there, unchanged)" in capsys.readouterr().out


def test_init_a_second_time_lists_every_existing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc") == 0
    before = {p: p.read_text() for p in tmp_path.rglob("*") if p.is_file()}
    capsys.readouterr()
    assert init(tmp_path, "calc", "judge") == 2
    err = capsys.readouterr().err
    assert "refusing to overwrite 5 existing file(s)" in err
    for rel in template_targets("calc", "judge")[:-1]:  # judge's own dataset is new
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
    assert "invalid choice: 'langchain'" in err and "multiply-local-strands" in err


def test_validate_passes_a_fresh_rollout_and_prints_one_line_per_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc") == 0
    capsys.readouterr()
    code = main(
        [
            "validate",
            "--dataset",
            str(tmp_path / "data/multiply.jsonl"),
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
    assert "ok    dataset[data/multiply.jsonl]" in out
    assert "ok    eval-config[configs/eval/calc.toml]" in out
    assert "ok    training-config[configs/training/calc.toml]" in out
    assert "ok    entrypoint[rollouts/calc/main.py]" in out
    assert "all 4 check(s) passed" in out  # the configs' entrypoint is imported once


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


def test_a_module_missing_from_this_environment_warns_and_passes_as_the_official_preflight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = tmp_path / "rollouts" / "broken" / "main.py"
    entry.parent.mkdir(parents=True)
    entry.write_text("import not_a_module_anywhere\n")
    assert main(["validate", str(entry)]) == 0
    out = capsys.readouterr().out
    assert f"ok    entrypoint[{entry}]: import skipped" in out
    assert "warning: " in out and "ModuleNotFoundError" in out and "not_a_module_anywhere" in out


def test_a_module_entrypoint_that_does_not_exist_fails_rather_than_warns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["validate", "no_such_rollout_package.main:app"]) == 1
    out = capsys.readouterr().out
    assert "error entrypoint[no_such_rollout_package.main:app]:" in out
    assert "is neither a file nor an importable module" in out


def test_an_entrypoint_that_raises_while_importing_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = tmp_path / "main.py"
    entry.write_text("raise ValueError('MODEL_NAME is not set')\n")
    assert main(["validate", str(entry)]) == 1
    out = capsys.readouterr().out
    assert f"error entrypoint[{entry}]:" in out
    assert "ValueError: MODEL_NAME is not set" in out


def test_a_workflow_without_a_grader_passes_and_runs_ungraded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = tmp_path / "main.py"
    entry.write_text(
        "from osmosis_rollout import AgentWorkflow\n\n"
        "class Only(AgentWorkflow):\n"
        "    async def run(self, ctx):\n"
        "        return None\n"
    )
    assert main(["validate", str(entry)]) == 0
    out = capsys.readouterr().out
    assert "workflow Only, no grader (rows run ungraded and report no reward)" in out


def test_an_entrypoint_with_nothing_to_run_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = tmp_path / "main.py"
    entry.write_text("x = 1\n")
    assert main(["validate", str(entry)]) == 1
    assert "found no FastAPI app, ExecutionBackend or AgentWorkflow subclass" in (
        capsys.readouterr().out
    )


def test_validate_config_imports_the_entrypoint_the_config_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "configs" / "eval" / "calc.toml"
    config.parent.mkdir(parents=True)
    config.write_text(GOOD_TOML)
    entry = tmp_path / "rollouts" / "calc" / "main.py"
    entry.parent.mkdir(parents=True)
    entry.write_text("raise RuntimeError('broken at import')\n")
    assert main(["validate", "--config", str(config)]) == 1
    out = capsys.readouterr().out
    assert f"ok    eval-config[{config}]" in out
    assert f"error entrypoint[{entry}]:" in out and "RuntimeError: broken at import" in out


@pytest.mark.parametrize("submit", [False, True])
def test_validate_config_fails_when_the_rollout_path_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], submit: bool
) -> None:
    config = tmp_path / "configs" / "eval" / "calc.toml"
    config.parent.mkdir(parents=True)
    config.write_text(GOOD_TOML + '\n[secrets]\nrequired = ["OPENAI_API_KEY"]\n')
    (tmp_path / "rollouts").mkdir()
    args = ["validate", *(["--submit"] if submit else []), "--config", str(config)]
    assert main(args) == 1
    out = capsys.readouterr().out
    assert f"error eval-config[{config}]: rollout path rollouts/calc/main.py does not exist" in out
    assert "fix: set [experiment].rollout to a folder of" in out


def test_validate_submit_needs_the_config_inside_a_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "calc.toml"
    config.write_text(GOOD_TOML + '\n[secrets]\nrequired = ["OPENAI_API_KEY"]\n')
    assert main(["validate", "--config", str(config)]) == 0
    assert "warning: no workspace around" in capsys.readouterr().out
    assert main(["validate", "--submit", "--config", str(config)]) == 1
    assert "fix: keep the config at <workspace>/configs/eval/" in capsys.readouterr().out


def test_unsatisfied_rollout_dependencies_skip_the_import_with_the_install_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = tmp_path / "rollouts" / "calc" / "main.py"
    entry.parent.mkdir(parents=True)
    entry.write_text("raise RuntimeError('must not be imported')\n")
    (entry.parent / "pyproject.toml").write_text(
        '[project]\nname = "calc"\nversion = "0.1.0"\n'
        'dependencies = ["pytest>=8", "surely-not-installed-pkg>=1"]\n'
    )
    assert main(["validate", str(entry)]) == 0
    out = capsys.readouterr().out
    assert "import skipped" in out
    assert "surely-not-installed-pkg is not installed" in out
    assert 'pip install "surely-not-installed-pkg>=1"' in out


TRAINING_TOML = (
    GOOD_TOML
    + """
[training]
lr = 1e-5
total_epochs = 1

[sampling]
rollout_temperature = 1.0

[checkpoints]
checkpoint_save_freq = 20
"""
)


def test_validate_checks_a_training_config_with_the_official_sections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc") == 0
    config = tmp_path / "configs" / "training" / "calc.toml"
    config.write_text(TRAINING_TOML)
    capsys.readouterr()
    assert main(["validate", "--training-config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"ok    training-config[{config}]: rollout 'calc'" in out
    assert f"ok    entrypoint[{tmp_path / 'rollouts/calc/main.py'}]" in out


def test_a_training_config_typo_is_named_with_the_nearest_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "train.toml"
    config.write_text(
        TRAINING_TOML.replace("total_epochs", "total_epoch") + "\n[sampler]\ntop_p = 1\n"
    )
    assert main(["validate", "--training-config", str(config)]) == 1
    out = capsys.readouterr().out
    assert "training.total_epoch: unknown key" in out and "did you mean 'total_epochs'?" in out
    assert "sampler: unknown section" in out and "did you mean 'sampling'?" in out


def test_validate_reports_a_missing_entrypoint_and_still_runs_the_other_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(tmp_path, "calc") == 0
    capsys.readouterr()
    missing = tmp_path / "rollouts/other/main.py"
    code = main(["validate", "--dataset", str(tmp_path / "data/multiply.jsonl"), str(missing)])
    out = capsys.readouterr().out
    assert code == 1
    assert "ok    dataset[" in out
    assert f"error entrypoint[{missing}]: entrypoint file not found" in out
    assert "1 of 2 check(s) failed" in out


def next_steps(printed: str) -> list[str]:
    """The commands under ``next, offline`` in init's output (the pip line is conditional)."""
    block = printed.split("next, offline (no API key):\n", 1)[1].split("\n\n", 1)[0]
    return [line.strip() for line in block.splitlines() if not line.strip().startswith("pip ")]


def run_step(workspace: Path, step: str) -> Run:
    words = shlex.split(step, comments=True)
    if words[0] == "pytest":
        return run_pytest(workspace, *words[1:])
    assert words[0] == "osmosis-rollout", step
    return run_cli(workspace, *words[1:])


@pytest.mark.parametrize("template", sorted(TEMPLATES))
def test_init_then_the_commands_the_files_and_init_print_pass_for_every_template(
    template: str, tmp_path: Path
) -> None:
    created = run_cli(tmp_path, "init", "demo", "--template", template)
    assert created.returncode == 0, created.explain()
    steps = next_steps(created.stdout)
    assert [step.split()[0] for step in steps] == ["osmosis-rollout", "pytest", "pytest"]
    told = (tmp_path / "rollouts/demo/main.py").read_text(encoding="utf-8")
    assert f"    {steps[2]}\n" in told, "main.py and init must name the same command"
    validated = run_step(tmp_path, steps[0])
    assert validated.returncode == 0, validated.explain()
    assert shlex.split(steps[1], comments=True) == ["pytest"]  # the workspace says the rest
    ran = run_step(tmp_path, steps[1])
    dataset = TEMPLATES[template].dataset
    assert_all_rows_passed(ran, count_rows(tmp_path / "data" / f"{dataset}.jsonl"))


def test_template_apply_in_an_empty_folder_then_its_next_steps_pass_offline(tmp_path: Path) -> None:
    applied = run_cli(tmp_path, "template", "apply", "multiply-local-openai")
    assert applied.returncode == 0, applied.explain()
    validate, _, in_full = next_steps(applied.stdout)
    validated, ran = run_step(tmp_path, validate), run_step(tmp_path, in_full)
    assert validated.returncode == 0, validated.explain()
    assert "all 2 check(s) passed" in validated.stdout, validated.explain()
    assert_all_rows_passed(ran, count_rows(tmp_path / "data" / "multiply.jsonl"))


def test_the_eval_configs_own_dataset_runs_when_no_dataset_is_given(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "template", "apply", "plain").returncode == 0
    (tmp_path / "pyproject.toml").unlink()  # its osmosis_dataset would name the file itself
    ran = run_pytest(
        tmp_path,
        "--osmosis-config",
        "configs/eval/plain.toml",
        "--osmosis-policy",
        "rollouts/plain/policy.py:policy",
    )
    assert_all_rows_passed(ran, count_rows(tmp_path / "data" / "multiply.jsonl"))


def test_a_platform_dataset_without_a_local_file_is_named_with_the_fix(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "template", "apply", "plain").returncode == 0
    (tmp_path / "pyproject.toml").unlink()  # its osmosis_dataset would name the local file
    config = tmp_path / "configs" / "eval" / "plain.toml"
    config.write_text(config.read_text().replace('"multiply"', '"gsm8k-platform"'))
    ran = run_pytest(
        tmp_path,
        "--osmosis-config",
        "configs/eval/plain.toml",
        "--osmosis-policy",
        "rollouts/plain/policy.py:policy",
    )
    assert ran.returncode == 4, ran.explain()  # a usage error, not "no tests ran" (5)
    for text in (
        "[experiment].dataset = 'gsm8k-platform' has no local file",
        "looked for data/gsm8k-platform.jsonl, data/gsm8k-platform.csv, data/gsm8k-platform.parquet",
        "fetched by the official CLI",
        "osmosis eval submit configs/eval/plain.toml",
        "--osmosis-dataset path/to/rows.jsonl",
    ):
        assert text in ran.stderr, ran.explain()


WORKFLOW_ONLY = """\
from osmosis_rollout import AgentWorkflow
from osmosis_rollout.chat_client import RolloutChatClient


class Chat(AgentWorkflow):
    async def run(self, ctx):
        await RolloutChatClient(ctx.prompt).complete()
"""


def ungraded_workspace(root: Path) -> Path:
    (root / "rollouts" / "chat").mkdir(parents=True)
    (root / "rollouts" / "chat" / "main.py").write_text(WORKFLOW_ONLY)
    (root / "data").mkdir()
    (root / "data" / "rows.jsonl").write_text(
        "".join(
            json.dumps({"id": f"r{i}", "user_prompt": f"say {i}", "ground_truth": str(i)}) + "\n"
            for i in range(4)
        )
    )
    (root / "policy.py").write_text("def policy(request):\n    return 'hello'\n")
    return root


def test_a_workflow_without_a_grader_runs_its_rows_ungraded_and_they_pass(tmp_path: Path) -> None:
    root = ungraded_workspace(tmp_path)
    ran = run_pytest(
        root, "--osmosis-dataset", "data/rows.jsonl", "--osmosis-policy", "policy.py:policy"
    )
    assert ran.returncode == 0, ran.explain()
    assert "rows: 4  passed: 4  failed: 0" in ran.stdout, ran.explain()
    assert "6 passed" in ran.stdout, ran.explain()  # 4 rows + dataset and entrypoint preflight
    (report,) = (root / ".osmosis" / "runs").glob("*/report.json")
    rows = json.loads(report.read_text())["rows"]
    assert [row["reward"] for row in rows] == [None] * 4
    assert {row["status"] for row in rows} == {"success"}


def test_ungraded_rows_fail_once_the_user_sets_a_threshold(tmp_path: Path) -> None:
    root = ungraded_workspace(tmp_path)
    ran = run_pytest(
        root,
        "--osmosis-dataset",
        "data/rows.jsonl",
        "--osmosis-policy",
        "policy.py:policy",
        "--osmosis-pass-threshold",
        "0.5",
    )
    assert ran.returncode == 1, ran.explain()
    assert "r0 (rows.jsonl line 1): reward none < threshold 0.5" in ran.stdout, ran.explain()
    assert "no grader ran" in ran.stdout, ran.explain()


def test_re_applying_a_template_says_nothing_was_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["template", "apply", "plain", "--dir", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["template", "apply", "plain", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(
        "rollout 'plain' from template 'plain' is already there, every file unchanged; "
        "nothing written:\n"
    )
    assert (
        f"  {tmp_path / 'pyproject.toml'} (pytest configuration, already there, unchanged)" in out
    )


def test_a_workspaces_own_pyproject_gains_the_pytest_section_and_keeps_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = '[project]\nname = "mine"\nversion = "1"\n'
    (tmp_path / "pyproject.toml").write_text(mine)
    assert main(["template", "apply", "plain", "--dir", str(tmp_path)]) == 0
    text = (tmp_path / "pyproject.toml").read_text()
    assert text.startswith(mine + "\n[tool.pytest.ini_options]\n")
    assert 'osmosis_policy = "rollouts/plain/policy.py:policy"' in text
    assert "([tool.pytest.ini_options] added: a bare `pytest` here runs the rows)" in (
        capsys.readouterr().out
    )


def test_an_existing_pytest_configuration_is_left_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -q\n")
    assert main(["template", "apply", "plain", "--dir", str(tmp_path)]) == 0
    assert (tmp_path / "pytest.ini").read_text() == "[pytest]\naddopts = -q\n"
    assert not (tmp_path / "pyproject.toml").exists()
    out = capsys.readouterr().out
    assert "pytest.ini (pytest is already configured there, left as it is" in out
    steps = next_steps(out)
    assert steps[-1] == run_command("plain", "multiply")  # the full command, only
    assert [step for step in steps if step.startswith("pytest")] == steps[-1:]


def test_after_template_apply_a_bare_pytest_runs_the_rows(tmp_path: Path) -> None:
    assert run_cli(tmp_path, "template", "apply", "plain").returncode == 0
    assert_all_rows_passed(run_pytest(tmp_path), count_rows(tmp_path / "data" / "multiply.jsonl"))


def test_a_bare_pytest_in_a_new_workspace_opens_with_no_deprecation_warning(
    tmp_path: Path,
) -> None:
    assert run_cli(tmp_path, "template", "apply", "plain").returncode == 0
    assert (
        'asyncio_default_fixture_loop_scope = "function"'
        in (tmp_path / "pyproject.toml").read_text()
    )  # pytest-asyncio is installed here, as in the suite's environment
    # The user's own environment: not the suite's -o that sets the scope for inner runs.
    ran = run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"],
        tmp_path,
        PYTEST_ADDOPTS="-p no:schemathesis -p no:hypothesispytest",
    )
    assert ran.returncode == 0, ran.explain()
    assert "DeprecationWarning" not in ran.stdout + ran.stderr, ran.explain()
