"""CI gating: record/replay, repeats and row rules, the suite gate, baselines, preflight, server mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _support.net import free_port, wait_until_healthy
from workspaces import multiply_rows, write_rows

POLICY = "--osmosis-policy=policy.py:policy"
PREFLIGHT = 2

FLAKY_POLICY = '''
import re


def policy(request):
    """Right on attempts 0, 1 and 2; wrong on attempts 3 and 4: passes 3 of 5."""
    numbers = [int(n) for n in re.findall(r"-?\\d+", request.messages[-1]["content"])]
    if request.attempt >= 3:
        return "no idea"
    return f"The answer is {numbers[0] * numbers[1]}"
'''


def test_a_recording_replays_with_the_policy_removed(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    recorded = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-record-mode=once"
    )
    recorded.assert_outcomes(passed=4 + PREFLIGHT)
    cassettes = sorted((root / "data" / "cassettes").rglob("*.json"))
    assert len(cassettes) == 4
    (root / "policy.py").unlink()
    # A fresh process, as CI would run it: no key, no provider, just the cassettes.
    replayed = pytester.runpytest_subprocess("--osmosis-dataset=data/test.jsonl")
    replayed.assert_outcomes(passed=4 + PREFLIGHT)


def test_a_replay_miss_fails_that_row_with_the_difference(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-record-mode=once")
    (root / "policy.py").unlink()
    rows = multiply_rows(4)
    rows[2]["user_prompt"] = "What is 4 times 5, exactly?"
    write_rows(root / "data" / "test.jsonl", rows)
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl")
    # A miss leaves the row without a reward: an error of the row, not a failed assertion.
    result.assert_outcomes(passed=3 + PREFLIGHT, errors=1)
    out = result.stdout.str()
    assert "row-2" in out and "cassette" in out.lower()
    assert "What is 4 times 5, exactly?" in out


@pytest.fixture
def flaky(workspace: Callable[..., Path]) -> Path:
    return workspace(multiply_rows(1), policy=FLAKY_POLICY)


@pytest.mark.parametrize(
    ("rule", "passes"),
    [
        ("all", False),
        ("any", True),
        ("majority", True),
        ("at_least:3", True),
        ("at_least:4", False),
        ("rate:0.6", True),
        ("rate:0.8", False),
    ],
)
def test_a_flaky_row_is_judged_by_the_row_pass_rule(
    flaky: Path, pytester: pytest.Pytester, rule: str, passes: bool
) -> None:
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-n=5", f"--osmosis-row-pass={rule}"
    )
    if passes:
        result.assert_outcomes(passed=1 + PREFLIGHT)
    else:
        result.assert_outcomes(passed=PREFLIGHT, failed=1)
        result.stdout.fnmatch_lines(["*3/5 attempts reached reward >= 1; rule * not met*"])


def test_repeats_report_pass_at_k_and_flag_the_flaky_row(
    flaky: Path, pytester: pytest.Pytester
) -> None:
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-n=5",
        "--osmosis-row-pass=any",
        "--osmosis-report=r.json",
    )
    result.stdout.fnmatch_lines(
        [
            "*pass@1=0.600  pass@2=0.900  pass@4=1.000*pass^1=0.600  pass^2=0.300*",
            "*flaky rows*row-0 3/5*",
        ]
    )
    report = json.loads((flaky / "r.json").read_text())
    assert len(report["rows"]) == 5
    assert report["row_verdicts"][0]["flaky"] is True
    assert report["row_verdicts"][0]["pass_at_k"]["1"] == pytest.approx(0.6)
    assert sorted(a["run_index"] for a in report["rows"]) == [0, 1, 2, 3, 4]


def test_the_suite_gate_passes_at_the_rate_and_fails_below_it(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4, wrong={3}))
    at_rate = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-min-pass-rate=0.75"
    )
    # The gate is a test case of its own; the row it counts is an expected failure.
    at_rate.assert_outcomes(passed=3 + PREFLIGHT + 1, xfailed=1)
    assert at_rate.ret == pytest.ExitCode.OK
    at_rate.stdout.fnmatch_lines(["*gate: pass rate 75.0% >= 75.0%: passed (1 row(s) missed*"])
    below = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-min-pass-rate=0.8"
    )
    assert below.ret == pytest.ExitCode.TESTS_FAILED
    below.stdout.fnmatch_lines(["*gate: pass rate 75.0% < 80.0%: failed*"])
    without = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    assert without.ret == pytest.ExitCode.TESTS_FAILED


def test_a_baseline_shows_the_regression_and_can_fail_the_run(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-report=base.json"
    ).assert_outcomes(passed=4 + PREFLIGHT)
    write_rows(root / "data" / "test.jsonl", multiply_rows(4, wrong={1}))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-baseline=base.json",
        "--osmosis-min-pass-rate=0.5",
    )
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(
        ["*baseline: 1 regressed, 0 improved, 0 new, 0 gone*", "*REGRESSED data/test.jsonl::row-1*"]
    )
    strict = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl",
        POLICY,
        "--osmosis-baseline=base.json",
        "--osmosis-min-pass-rate=0.5",
        "--osmosis-fail-on-regression",
    )
    assert strict.ret == pytest.ExitCode.TESTS_FAILED


def test_a_baseline_that_is_not_a_report_is_a_clear_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    (root / "base.json").write_text("[]")
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-baseline=base.json"
    )
    assert "is not a pytest-osmosis report" in result.stdout.str() + result.stderr.str()


def test_preflight_only_runs_just_the_checks(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    (root / "configs" / "eval").mkdir(parents=True)
    (root / "configs" / "eval" / "demo.toml").write_text(
        '[experiment]\nrollout = "demo"\nentrypoint = "main.py"\nmodel_path = "openai/gpt-5-mini"\ndataset = "demo"\n'
    )
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-preflight-only", "-v"
    )
    result.assert_outcomes(passed=3, deselected=4)
    result.stdout.fnmatch_lines(
        [
            "*osmosis-preflight::dataset?test.jsonl? PASSED*",
            "*osmosis-preflight::entrypoint PASSED*",
            "*osmosis-preflight::eval-config PASSED*",
        ]
    )


def test_a_broken_eval_config_fails_its_preflight_item(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    (root / "bad.toml").write_text('[experiment]\nrollout = "demo"\n[surprise]\n')
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-config=bad.toml"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "bad.toml" in result.stderr.str()


def test_a_dataset_under_four_rows_warns_but_passes_preflight(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(2))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-preflight-only"
    )
    result.assert_outcomes(passed=2, deselected=2, warnings=1)
    result.stdout.fnmatch_lines(["*at least 4*"])


def test_the_html_report_is_written_with_rows_and_conversations(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4, wrong={2}))
    pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-html=report.html")
    page = (root / "report.html").read_text()
    assert '<svg class="histogram"' in page
    assert "row-2" in page and "I do not know" in page and "What is 3 times 4?" in page
    assert "http://" not in page and "https://" not in page


@pytest.fixture
def running_server(workspace: Callable[..., Path], pytester: pytest.Pytester) -> Iterator[str]:
    root = workspace(multiply_rows(4, wrong={3}))
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "osmosis_rollout.cli",
            "serve",
            "rollouts/demo/main.py",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=dict(os.environ, _OSMOSIS_ROLLOUT_ARTIFACT_ROOT=str(root / "server-artifacts")),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(url, process=proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _summary_line(result: pytest.RunResult) -> str:
    return next(line for line in result.stdout.lines if line.startswith("rows: "))


def test_server_mode_drives_a_running_server_with_the_same_summary(
    running_server: str, pytester: pytest.Pytester
) -> None:
    in_process = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    served = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, f"--osmosis-server={running_server}"
    )
    served.assert_outcomes(passed=3 + 1, failed=1)  # the dataset preflight, no entrypoint to check
    assert _summary_line(served) == _summary_line(in_process)
    assert "server" in served.stdout.str()


def test_osmosis_serve_starts_and_stops_the_entrypoints_server(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4, wrong={3}))
    in_process = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    served = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-serve")
    served.assert_outcomes(passed=3 + PREFLIGHT, failed=1)
    assert _summary_line(served) == _summary_line(in_process)


def test_an_unreachable_server_stops_the_run_before_any_row(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(4))
    url = f"http://127.0.0.1:{free_port()}"
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, f"--osmosis-server={url}"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert f"--osmosis-server {url}: no rollout server there" in out


def test_a_real_model_is_recorded_once_then_replayed_in_ci_without_a_key(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CI flow: record with a LiteLLM model and a key, then replay with neither."""
    from osmosis_rollout.controller import PolicyServer

    root = workspace(multiply_rows(4))
    provider_policy = (root / "policy.py").read_text()
    namespace: dict[str, object] = {}
    exec(compile(provider_policy, "policy.py", "exec"), namespace)
    with PolicyServer(namespace["policy"]) as provider:  # an OpenAI-compatible provider on loopback
        monkeypatch.setenv("OPENAI_BASE_URL", provider.rollout_url("provider"))
        monkeypatch.setenv("OPENAI_API_KEY", provider.api_key)
        # A subprocess: litellm imported into this process breaks later in-process pytest runs.
        recorded = pytester.runpytest_subprocess(
            "--osmosis-dataset=data/test.jsonl",
            "--osmosis-model=openai/gpt-test",
            "--osmosis-record-mode=once",
        )
        recorded.assert_outcomes(passed=4 + PREFLIGHT)
        assert len(provider.log("provider").calls) == 4
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    written = [
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix in {".json", ".jsonl", ".html", ".log"}
    ]
    assert all(provider.api_key not in p.read_text(errors="replace") for p in written)
    # A fresh process, as CI would run it: no key, no provider, just the cassettes.
    replayed = pytester.runpytest_subprocess("--osmosis-dataset=data/test.jsonl")
    replayed.assert_outcomes(passed=4 + PREFLIGHT)


def test_server_mode_sends_the_inbound_api_key_from_the_environment(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace(multiply_rows(4))
    monkeypatch.setenv("OSMOSIS_ROLLOUT_API_KEY", "inbound-secret-123")
    served = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-serve", "--osmosis-concurrency=40"
    )
    served.assert_outcomes(passed=4 + PREFLIGHT)


def test_rollout_logs_are_written_to_the_run_log(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(multiply_rows(4))
    pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-record-mode=once")
    (root / "policy.py").unlink()
    rows = multiply_rows(4)
    rows[1]["user_prompt"] = "changed one"
    rows[3]["user_prompt"] = "changed three"
    write_rows(root / "data" / "test.jsonl", rows)
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", "--osmosis-output=out")
    result.assert_outcomes(passed=2 + PREFLIGHT, errors=2)
    log = (root / "out" / "rollouts.log").read_text()
    assert "changed one" in log and "changed three" in log
