"""load_eval_config: the eval TOML rules and their local-run coercion."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from osmosis_rollout.errors import ConfigError
from osmosis_rollout.workspace.eval_config import load_eval_config

WriteToml = Callable[[str], Path]

EXPERIMENT = """
[experiment]
rollout = "calc"
entrypoint = "main.py"
model_path = "openai/gpt-5-mini"
dataset = "calc-test"
"""


def _error(write_toml: WriteToml, text: str, **kwargs: bool) -> str:
    path = write_toml(text)
    with pytest.raises(ConfigError) as caught:
        load_eval_config(path, **kwargs)
    message = str(caught.value)
    assert message.startswith(str(path))  # every error names the file
    return message


def test_a_full_config_is_read(write_toml: WriteToml) -> None:
    config = load_eval_config(
        write_toml(
            EXPERIMENT
            + """
branch = "feature/x"

[evaluation]
limit = 200
n = 4
batch_size = 8
pass_threshold = 0.5
agent_workflow_timeout_s = 450
grader_timeout_s = 150.5

[env]
LOG_LEVEL = "INFO"

[secrets]
required = ["OPENAI_API_KEY"]
"""
        )
    )
    assert config.experiment.rollout == "calc"
    assert config.experiment.model_path == "openai/gpt-5-mini"
    assert config.experiment.branch == "feature/x" and config.experiment.commit_sha is None
    evaluation = config.evaluation
    assert (evaluation.limit, evaluation.n, evaluation.batch_size) == (200, 4, 8)
    assert evaluation.pass_threshold == 0.5
    assert evaluation.agent_workflow_timeout_s == 450.0
    assert isinstance(evaluation.agent_workflow_timeout_s, float)
    assert evaluation.grader_timeout_s == 150.5
    assert config.env == {"LOG_LEVEL": "INFO"}
    assert config.secrets == ("OPENAI_API_KEY",)
    assert config.warnings == ()


def test_evaluation_defaults_for_a_local_run(write_toml: WriteToml) -> None:
    evaluation = load_eval_config(write_toml(EXPERIMENT)).evaluation
    assert evaluation.n == 1
    assert evaluation.pass_threshold == 1.0
    assert evaluation.limit is None and evaluation.batch_size is None
    assert evaluation.agent_workflow_timeout_s is None and evaluation.grader_timeout_s is None
    assert evaluation.configured == frozenset()


def test_a_zero_pass_threshold_is_honoured(write_toml: WriteToml) -> None:
    config = load_eval_config(write_toml(EXPERIMENT + "[evaluation]\npass_threshold = 0.0\n"))
    assert config.evaluation.pass_threshold == 0.0
    assert config.evaluation.configured == frozenset({"pass_threshold"})


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", "must be a number"),
        ('"1.0"', "must be a number"),
        ("inf", "must be finite"),
        ("nan", "must be finite"),
    ],
)
def test_pass_threshold_must_be_a_finite_number(
    write_toml: WriteToml, value: str, expected: str
) -> None:
    message = _error(write_toml, EXPERIMENT + f"[evaluation]\npass_threshold = {value}\n")
    assert f"evaluation.pass_threshold: {expected}" in message


@pytest.mark.parametrize("value", ["0", "-2", "1.5", "true"])
def test_n_must_be_a_positive_integer(write_toml: WriteToml, value: str) -> None:
    assert "evaluation.n: must be" in _error(
        write_toml, EXPERIMENT + f"[evaluation]\nn = {value}\n"
    )


def test_batch_size_and_limit_must_be_integers(write_toml: WriteToml) -> None:
    message = _error(write_toml, EXPERIMENT + '[evaluation]\nlimit = "all"\nbatch_size = 2.0\n')
    assert "evaluation.limit: must be an integer, got 'all' (str)" in message
    assert "evaluation.batch_size: must be an integer" in message


def test_timeouts_must_be_finite_and_not_negative(write_toml: WriteToml) -> None:
    message = _error(
        write_toml,
        EXPERIMENT + "[evaluation]\nagent_workflow_timeout_s = inf\ngrader_timeout_s = -1\n",
    )
    assert "evaluation.agent_workflow_timeout_s: must be finite" in message
    assert "evaluation.grader_timeout_s: must not be negative" in message


def test_unknown_evaluation_keys_are_rejected(write_toml: WriteToml) -> None:
    message = _error(write_toml, EXPERIMENT + "[evaluation]\npass_treshold = 0.5\n")
    assert "evaluation.pass_treshold: unknown key" in message
    assert "did you mean 'pass_threshold'?" in message


def test_the_experiment_section_is_required(write_toml: WriteToml) -> None:
    assert "experiment: section is required" in _error(write_toml, "[evaluation]\nn = 1\n")


@pytest.mark.parametrize("key", ["rollout", "entrypoint", "model_path", "dataset"])
def test_each_experiment_key_is_required(write_toml: WriteToml, key: str) -> None:
    text = "\n".join(line for line in EXPERIMENT.splitlines() if not line.startswith(key))
    message = _error(write_toml, text)
    assert f"experiment.{key}: is required\n  fix: add {key} = " in message


def test_experiment_values_must_be_non_empty_strings(write_toml: WriteToml) -> None:
    message = _error(write_toml, EXPERIMENT.replace('"calc-test"', '""'))
    assert "experiment.dataset: must be a non-empty string" in message


def test_unknown_experiment_keys_are_rejected(write_toml: WriteToml) -> None:
    assert "experiment.model: unknown key" in _error(write_toml, EXPERIMENT + 'model = "x"\n')


def test_unknown_sections_are_rejected(write_toml: WriteToml) -> None:
    message = _error(write_toml, EXPERIMENT + "[evaluaton]\nn = 2\n")
    assert "evaluaton: unknown section" in message
    assert "did you mean 'evaluation'?" in message


def test_branch_and_commit_sha_are_mutually_exclusive(write_toml: WriteToml) -> None:
    message = _error(write_toml, EXPERIMENT + 'branch = "main"\ncommit_sha = "abcdef1"\n')
    assert "experiment: sets both branch and commit_sha" in message


@pytest.mark.parametrize("sha", ["abc", "xyz1234", "a" * 41])
def test_commit_sha_must_be_7_to_40_hex_characters(write_toml: WriteToml, sha: str) -> None:
    message = _error(write_toml, EXPERIMENT + f'commit_sha = "{sha}"\n')
    assert "experiment.commit_sha: must be a Git commit SHA of 7-40 hex characters" in message


def test_a_pinned_commit_is_kept(write_toml: WriteToml) -> None:
    config = load_eval_config(write_toml(EXPERIMENT + 'commit_sha = "ABCDEF0123"\n'))
    assert config.experiment.commit_sha == "ABCDEF0123"


@pytest.mark.parametrize("branch", ["", "my branch"])
def test_branch_must_be_non_empty_without_whitespace(write_toml: WriteToml, branch: str) -> None:
    assert "experiment.branch: must be" in _error(write_toml, EXPERIMENT + f'branch = "{branch}"\n')


@pytest.mark.parametrize("rollout", ["a/b", "..", ".", "/abs", "a\\\\b"])
def test_rollout_must_be_a_single_directory_name(write_toml: WriteToml, rollout: str) -> None:
    message = _error(write_toml, EXPERIMENT.replace('"calc"', f'"{rollout}"'))
    assert "experiment.rollout: must be a single directory name under rollouts/" in message


@pytest.mark.parametrize("entrypoint", ["../other/main.py", "/abs/main.py", "a/../../main.py"])
def test_entrypoint_must_stay_inside_the_rollout_folder(
    write_toml: WriteToml, entrypoint: str
) -> None:
    message = _error(write_toml, EXPERIMENT.replace('"main.py"', f'"{entrypoint}"'))
    assert "experiment.entrypoint: must be a path inside rollouts/<rollout>/" in message


def test_entrypoint_path_resolves_under_the_workspace(
    write_toml: WriteToml, tmp_path: Path
) -> None:
    config = load_eval_config(write_toml(EXPERIMENT.replace('"main.py"', '"src/main.py"')))
    assert config.entrypoint_path(tmp_path) == tmp_path / "rollouts" / "calc" / "src" / "main.py"


def test_advanced_keys_pass_through_with_a_warning(write_toml: WriteToml) -> None:
    config = load_eval_config(write_toml(EXPERIMENT + "[advanced]\nfoo = 1\nbar = { x = 2 }\n"))
    assert config.advanced == {"foo": 1, "bar": {"x": 2}}
    assert config.warnings == ("[advanced] keys are recorded but not used by local runs: bar, foo",)


def test_env_values_must_be_strings(write_toml: WriteToml) -> None:
    message = _error(write_toml, EXPERIMENT + "[env]\nRETRIES = 3\n")
    assert "env.RETRIES: must be a string, got 3 (int)" in message
    assert 'fix: quote the value: RETRIES = "3"' in message


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("lower", "is not a valid variable name"),
        ("1ABC", "is not a valid variable name"),
        ("_OSMOSIS_PORT", "names starting with _OSMOSIS_ are reserved"),
    ],
)
def test_env_names_follow_the_rules(write_toml: WriteToml, name: str, expected: str) -> None:
    assert f"env.{name}: {expected}" in _error(write_toml, EXPERIMENT + f'[env]\n{name} = "x"\n')


def test_env_names_may_start_with_an_underscore(write_toml: WriteToml) -> None:
    assert load_eval_config(write_toml(EXPERIMENT + '[env]\n_DEBUG = "1"\n')).env == {"_DEBUG": "1"}


def test_secrets_are_optional_for_local_runs(write_toml: WriteToml) -> None:
    assert load_eval_config(write_toml(EXPERIMENT)).secrets == ()


def test_secrets_are_required_to_submit(write_toml: WriteToml) -> None:
    message = _error(write_toml, EXPERIMENT, require_secrets=True)
    assert "secrets: section is required to submit an eval" in message
    config = load_eval_config(
        write_toml(EXPERIMENT + "[secrets]\nrequired = []\n"), require_secrets=True
    )
    assert config.secrets == ()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("optional = []", "secrets.optional: unknown key"),
        ("", "secrets.required: is missing"),
        ('required = "KEY"', "secrets.required: must be a list of names"),
        ('required = ["lower"]', "'lower' is not a valid secret name"),
        ('required = ["_KEY"]', "'_KEY' is not a valid secret name"),
        ('required = ["KEY", "KEY"]', "lists 'KEY' twice"),
    ],
)
def test_secret_names_follow_the_rules(write_toml: WriteToml, body: str, expected: str) -> None:
    assert expected in _error(write_toml, EXPERIMENT + f"[secrets]\n{body}\n")


def test_a_name_cannot_be_both_env_and_secret(write_toml: WriteToml) -> None:
    message = _error(
        write_toml, EXPERIMENT + '[env]\nAPI_KEY = "x"\n[secrets]\nrequired = ["API_KEY"]\n'
    )
    assert "'API_KEY' is also set in [env]" in message


def test_every_problem_is_reported_at_once(write_toml: WriteToml) -> None:
    message = _error(write_toml, EXPERIMENT + "extra = 1\n[evaluation]\nn = 0\n[env]\nx = 1\n")
    assert "4 problems in this eval config:" in message
    for key in ("experiment.extra", "evaluation.n", "env.x"):
        assert f"  - {key}: " in message


def test_invalid_toml_names_the_file_and_line(write_toml: WriteToml) -> None:
    message = _error(write_toml, EXPERIMENT + "[evaluation\n")
    assert "invalid TOML" in message and "line" in message


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="eval config not found"):
        load_eval_config(tmp_path / "missing.toml")


def test_a_section_that_is_not_a_table_is_rejected(write_toml: WriteToml) -> None:
    assert "env: must be a table" in _error(write_toml, 'env = "x"\n' + EXPERIMENT)


def test_the_sections_are_pydantic_models_that_forbid_extra_keys() -> None:
    from pydantic import BaseModel

    from osmosis_rollout.workspace.eval_config import EvalConfig, EvaluationConfig, ExperimentConfig

    for model in (EvalConfig, EvaluationConfig, ExperimentConfig):
        assert issubclass(model, BaseModel)
        assert model.model_config.get("extra") == "forbid"


def test_read_experiment_reads_only_that_table(write_toml: WriteToml) -> None:
    from osmosis_rollout.workspace.eval_config import read_experiment

    path = write_toml(EXPERIMENT + "[training]\nlr = 1e-5\n")
    assert read_experiment(path).dataset == "calc-test"
    with pytest.raises(ConfigError, match="experiment: section is required"):
        read_experiment(write_toml("[training]\nlr = 1\n"))


TRAINING = (
    EXPERIMENT
    + """
[training]
lr = 1e-5
total_epochs = 2
[sampling]
rollout_temperature = 1.0
[checkpoints]
eval_interval = 10
[env]
LOG_LEVEL = "INFO"
"""
)


def test_a_training_config_with_the_official_sections_is_read(tmp_path: Path) -> None:
    from osmosis_rollout.workspace.training_config import load_training_config

    path = tmp_path / "train.toml"
    path.write_text(TRAINING)
    config = load_training_config(path)
    assert config.training.lr == 1e-5 and config.training.total_epochs == 2
    assert config.sampling.rollout_temperature == 1.0
    assert config.checkpoints.eval_interval == 10
    assert config.env == {"LOG_LEVEL": "INFO"} and config.secrets == ()


def test_a_training_config_reports_every_problem_with_its_fix(tmp_path: Path) -> None:
    from osmosis_rollout.workspace.training_config import load_training_config

    path = tmp_path / "train.toml"
    path.write_text(
        TRAINING.replace("lr = 1e-5", "learning_rat = 1e-5")
        + "[evaluation]\nn = 1\n[secrets]\nrequired = ['lower']\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_training_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: 3 problems in this training config:")
    assert "training.learning_rat: unknown key" in message
    assert "evaluation: unknown section" in message
    assert "'lower' is not a valid secret name" in message
