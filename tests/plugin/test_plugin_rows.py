"""Dataset rows become items, run concurrently, and pass or fail on the reward."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows, write_rows

POLICY = "--osmosis-policy=policy.py:policy"
PREFLIGHT = 2  # the dataset and entrypoint checks, which pass in these tests


def test_every_row_becomes_an_item_that_passes_on_its_reward(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "-v")
    result.assert_outcomes(passed=4 + PREFLIGHT)
    result.stdout.fnmatch_lines(
        ["*data/test.jsonl::row-0 PASSED*", "*data/test.jsonl::row-3 PASSED*"]
    )


def test_items_are_named_by_the_id_column_when_the_dataset_has_one(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(2, ids=True))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--co", "-q")
    result.stdout.fnmatch_lines(["data/test.jsonl::case-0", "data/test.jsonl::case-1"])


def test_a_wrong_answer_fails_with_reward_threshold_label_answer_and_trajectory(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(3, wrong={1}))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.assert_outcomes(passed=2 + PREFLIGHT, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*row-1 (test.jsonl line 2): reward 0 < threshold 1*",
            "*last assistant message: I do not know*",
            "*label: 12*",
            "*trajectory: *trajectory.json*",
        ]
    )


def test_the_pass_threshold_flag_lowers_the_bar(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(2, wrong={0}))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-pass-threshold=0"
    )
    result.assert_outcomes(passed=2 + PREFLIGHT)


def test_a_removed_sample_is_reported_as_skipped(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace([{"user_prompt": "What is 2 times 3?", "ground_truth": "REMOVE"}, *multiply_rows(1)])
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.assert_outcomes(passed=1 + PREFLIGHT, skipped=1)


def test_rows_and_limit_select_rows_before_anything_runs(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(8))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-rows=1,3-4", "--co", "-q"
    )
    result.stdout.fnmatch_lines(
        ["data/test.jsonl::row-1", "data/test.jsonl::row-3", "data/test.jsonl::row-4"]
    )
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-limit=2")
    result.assert_outcomes(passed=2 + PREFLIGHT)


def test_k_selects_rows_and_only_those_run(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(5))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "-k", "row-2", "--osmosis-report=r.json"
    )
    result.assert_outcomes(passed=1, deselected=4 + PREFLIGHT)
    report = json.loads((root / "r.json").read_text())
    assert [r["row_key"] for r in report["rows"]] == ["row-2"]


def test_the_json_report_carries_the_official_summary_and_index_keys(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(3, wrong={2}))
    pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-report=out/report.json"
    )
    report = json.loads((root / "out" / "report.json").read_text())
    summary = report["summary"]
    for key in (
        "total_samples",
        "completed_samples",
        "graded",
        "passed",
        "failed",
        "skipped",
        "pass_rate",
        "pass_threshold",
        "reward_stats",
        "tokens_used",
    ):
        assert key in summary, key
    assert summary["passed"] == 2 and summary["total_samples"] == 3
    row = report["rows"][0]
    for key in (
        "row_index",
        "run_index",
        "rollout_id",
        "status",
        "reward",
        "tokens",
        "duration_ms",
        "error_type",
        "trajectory_filename",
        "nodeid",
    ):
        assert key in row, key
    assert Path(row["trajectory_filename"]).is_file()
    assert report["rows"][2]["status"] == "success" and report["rows"][2]["reward"] == 0.0


def test_the_summary_is_printed_only_when_rows_ran(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(2))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.stdout.fnmatch_lines(
        ["*osmosis summary*", "rows: 2  passed: 2  failed: 0  skipped: 0  pass rate: 100.0%*"]
    )
    pytester.makepyfile(test_plain="def test_x():\n    pass\n")
    plain = pytester.runpytest("test_plain.py")
    assert "osmosis summary" not in plain.stdout.str()


def test_a_bad_dataset_fails_collection_naming_file_line_and_fix(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(2))
    (root / "data" / "test.jsonl").write_text(
        '{"user_prompt": "a", "ground_truth": "1"}\n{"user_prompt": \n'
    )
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.stdout.fnmatch_lines(["*bad dataset*", "*test.jsonl*row 2*", "*fix:*"])
    assert result.ret == pytest.ExitCode.INTERRUPTED


def test_a_missing_dataset_is_a_usage_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest("--osmosis-dataset=data/nope.jsonl", POLICY)
    result.stderr.fnmatch_lines(["*--osmosis-dataset: file not found: *nope.jsonl*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_two_rollouts_in_the_workspace_ask_which_one(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace()
    (root / "rollouts" / "other").mkdir()
    (root / "rollouts" / "other" / "main.py").write_text("")
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.stderr.fnmatch_lines(
        [
            "*2 rollouts found*choose one*",
            "*--osmosis-rollout rollouts/demo/main.py*",
            "*--osmosis-rollout rollouts/other/main.py*",
        ]
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR


def test_an_invalid_option_value_names_the_value_and_the_choices(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-row-pass=most"
    )
    result.stderr.fnmatch_lines(
        [
            "*--osmosis-row-pass: invalid rule 'most'; expected one of all|any|majority|at_least:K|rate:R*"
        ]
    )
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-concurrency=0"
    )
    result.stderr.fnmatch_lines(["*--osmosis-concurrency: must be >= 1, got '0'*"])


def test_ini_values_apply_and_the_command_line_beats_them(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(3, wrong={0}))
    pytester.makeini(
        "[pytest]\nosmosis_dataset = data/test.jsonl\nosmosis_policy = policy.py:policy\nosmosis_pass_threshold = 0\n"
    )
    pytester.runpytest().assert_outcomes(passed=3 + PREFLIGHT)
    pytester.runpytest("--osmosis-pass-threshold=1").assert_outcomes(passed=2 + PREFLIGHT, failed=1)


def test_maxfail_stops_and_cancels_the_remaining_rows(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(6, wrong={0}))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "-x")
    result.assert_outcomes(passed=PREFLIGHT, failed=1)
    assert "stopping after 1 failures" in result.stdout.str()


def test_a_workflow_exception_fails_the_row_with_its_category(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    main = """
from osmosis_rollout import AgentWorkflow, Grader


class Boom(AgentWorkflow):
    async def run(self, ctx):
        raise RuntimeError("the tool exploded")


class G(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""
    workspace(multiply_rows(1), main=main)
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.assert_outcomes(passed=PREFLIGHT, errors=1)
    assert (
        "row-0 (test.jsonl line 1): rollout failed [agent_error]: the tool exploded"
        in result.stdout.str()
    )


def test_the_agent_timeout_flag_turns_a_slow_rollout_into_a_timeout(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    main = """
import asyncio
from osmosis_rollout import AgentWorkflow, Grader


class Slow(AgentWorkflow):
    async def run(self, ctx):
        await asyncio.sleep(5)
        return []


class G(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""
    workspace(multiply_rows(1), main=main)
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-agent-timeout=0.2"
    )
    result.assert_outcomes(passed=PREFLIGHT, errors=1)
    assert "rollout failed [timeout]: workflow exceeded its 0.2s deadline" in result.stdout.str()


def test_junit_xml_carries_the_reward_as_a_property(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(1))
    pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--junitxml=junit.xml")
    xml = (root / "junit.xml").read_text()
    assert 'name="osmosis_reward" value="1.0"' in xml


def test_pytest_runs_normally_with_the_plugin_disabled(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    pytester.makepyfile(test_plain="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:osmosis", "test_plain.py")
    result.assert_outcomes(passed=1)


def test_rows_run_under_xdist_and_the_summary_is_still_one(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(6, wrong={5}))
    result = pytester.runpytest_subprocess(
        "--osmosis-dataset=data/test.jsonl", POLICY, "-n", "2", "--osmosis-report=r.json"
    )
    result.assert_outcomes(passed=5 + PREFLIGHT, failed=1)
    assert result.stdout.str().count("osmosis summary") == 1
    report = json.loads((root / "r.json").read_text())
    assert len(report["rows"]) == 6


def test_a_second_dataset_adds_its_rows(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(2))
    write_rows(root / "data" / "more.jsonl", multiply_rows(3))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", "--osmosis-dataset=data/more.jsonl", POLICY
    )
    result.assert_outcomes(passed=5 + PREFLIGHT + 1)  # a dataset check per file


def test_eval_toml_values_are_defaults_that_flags_override(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4, wrong={0}))
    (root / "configs" / "eval").mkdir(parents=True)
    (root / "configs" / "eval" / "demo.toml").write_text(
        '[experiment]\nrollout = "demo"\nentrypoint = "main.py"\nmodel_path = "openai/gpt-5-mini"\ndataset = "demo"\n'
        "[evaluation]\npass_threshold = 0.0\nlimit = 3\n"
    )
    by_toml = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    by_toml.assert_outcomes(passed=3 + PREFLIGHT + 1)  # + the eval-config check
    by_flag = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-pass-threshold=1",
        "--osmosis-limit=4",
    )
    by_flag.assert_outcomes(passed=3 + PREFLIGHT + 1, failed=1)


def test_last_failed_reruns_only_the_failed_rows(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(5, wrong={3}))
    pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    rerun = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--lf", "--osmosis-report=r.json"
    )
    rerun.assert_outcomes(failed=1, deselected=4 + PREFLIGHT)
    report = json.loads((root / "r.json").read_text())
    assert [r["row_key"] for r in report["rows"]] == ["row-3"]


def test_no_policy_stops_the_run_once_with_the_ways_to_give_one(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert out.count("no policy to answer") == 1
    assert "--osmosis-policy FILE:CALLABLE" in out and "--osmosis-model LITELLM_ID" in out


def test_a_node_id_runs_just_that_row_even_with_the_dataset_in_the_ini(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    pytester.makeini(
        "[pytest]\nosmosis_dataset = data/test.jsonl\nosmosis_policy = policy.py:policy\n"
    )
    result = pytester.runpytest("data/test.jsonl::row-2", "--osmosis-report=r.json")
    result.assert_outcomes(passed=1)  # a node id selects just that item, as in pytest
    pytester.makepyfile(test_unit="def test_unit():\n    pass\n")
    unit_only = pytester.runpytest("test_unit.py")
    unit_only.assert_outcomes(passed=1)
    both = pytester.runpytest("test_unit.py", "--osmosis-dataset=data/test.jsonl")
    both.assert_outcomes(passed=1 + 4 + PREFLIGHT)


def test_ini_paths_are_relative_to_the_ini_file_from_any_directory(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace(multiply_rows(3))
    pytester.makeini(
        "[pytest]\nosmosis_dataset = data/test.jsonl\nosmosis_policy = policy.py:policy\n"
        "osmosis_report = out/r.json\n"
    )
    monkeypatch.chdir(root / "data")
    result = pytester.runpytest("--osmosis-html=here.html")
    result.assert_outcomes(passed=3 + PREFLIGHT)
    assert (root / "out" / "r.json").is_file()  # the ini's path: beside the ini file
    assert (root / "data" / "here.html").is_file()  # the command line's: where pytest ran
