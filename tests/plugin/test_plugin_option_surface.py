"""The option surface: grouped help, stated defaults, clearer aliases, and nonsense values
refused up front as usage errors (exit 4) that name the fix, never as every row failing."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_osmosis.options import OPTIONS

POLICY = "--osmosis-policy=policy.py:policy"
DATASET = "--osmosis-dataset=data/test.jsonl"
GROUPS = ("selection", "running", "policy", "gating", "outputs", "server")


def _usage_error(result: pytest.RunResult, *lines: str) -> None:
    """Exit 4, the message as pytest's own ``ERROR:`` line, and no ``pytest.exit`` trace."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {line}" for line in lines])
    output = result.stdout.str() + result.stderr.str()
    assert "_pytest.outcomes.Exit" not in output
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()


def test_help_groups_the_options_by_what_they_are_for(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest("--help").stdout.str()
    headings = re.findall(r"^osmosis: (\w+)", help_text, flags=re.MULTILINE)
    assert headings == list(GROUPS)
    for spec in OPTIONS:
        assert spec.flag in help_text


def test_every_option_states_its_default() -> None:
    unstated = [spec.flag for spec in OPTIONS if "default" not in spec.help]
    assert unstated == []


def test_the_old_names_of_renamed_options_still_work(pytester: pytest.Pytester) -> None:
    help_text = pytester.runpytest("--help").stdout.str()
    for old, new in (
        ("--osmosis-serve", "--osmosis-start-server"),
        ("--osmosis-server", "--osmosis-server-url"),
        ("--osmosis-report", "--osmosis-json-report"),
        ("--osmosis-html", "--osmosis-html-report"),
    ):
        assert re.search(rf"{new}(=\S+)?, {old}\b", help_text), (new, old)


def test_json_report_writes_the_report_as_report_did(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace()
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-json-report=out.json")
    assert result.ret == pytest.ExitCode.OK
    assert (
        json.loads((root / "out.json").read_text(encoding="utf-8"))["summary"]["rows"]["total"] == 4
    )


@pytest.mark.parametrize("limit", ["0", "-1"])
def test_a_limit_below_one_is_a_usage_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester, limit: str
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, POLICY, f"--osmosis-limit={limit}")
    _usage_error(
        result,
        f"--osmosis-limit: must be >= 1, got '{limit}'*drop --osmosis-limit to run every row*",
    )


def test_an_empty_row_selection_is_a_usage_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-rows=")
    _usage_error(result, "--osmosis-rows: empty*e.g. 3,7,10-20*")


def test_a_malformed_row_selection_is_a_usage_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-rows=first")
    _usage_error(result, "--osmosis-rows: *first*")


def test_a_pass_threshold_above_one_is_a_usage_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-pass-threshold=1.5")
    _usage_error(result, "--osmosis-pass-threshold: must be between 0 and 1*got '1.5'*")


@pytest.mark.parametrize("address", ["banana", "http://10.0.0.5:6379", "host:port"])
def test_a_nonsense_ray_address_is_a_usage_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester, address: str
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, POLICY, f"--osmosis-ray={address}")
    _usage_error(
        result, f"--osmosis-ray: {address!r} is not *auto, local, HOST:PORT or ray://HOST:PORT*"
    )


@pytest.mark.parametrize("host", ["not a host", "http://10.0.0.5", "10.0.0.5:8000", "10.0.0.999"])
def test_a_nonsense_policy_host_is_a_usage_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester, host: str
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, POLICY, f"--osmosis-policy-host={host}")
    _usage_error(result, f"--osmosis-policy-host: {host!r} is not a host name or IP address*")


@pytest.mark.parametrize("host", ["10.0.0.5", "build-agent.local", "::1", "[::1]"])
def test_a_policy_host_that_is_an_address_is_accepted(
    workspace: Callable[..., Path], pytester: pytest.Pytester, host: str
) -> None:
    from pytest_osmosis.options import resolve_settings

    workspace()
    config = pytester.parseconfig(DATASET, POLICY, f"--osmosis-policy-host={host}")
    assert resolve_settings(config).policy_host == host


@pytest.mark.parametrize("url", ["banana", "localhost:8000", "ftp://10.0.0.5:8000", "http://"])
def test_a_server_url_that_is_no_http_url_is_a_usage_error(
    workspace: Callable[..., Path], pytester: pytest.Pytester, url: str
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, POLICY, f"--osmosis-server-url={url}")
    _usage_error(result, f"--osmosis-server: {url!r} is not a URL*http://HOST:PORT*")


def test_no_policy_is_a_usage_error_without_an_exit_trace(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest(DATASET)
    _usage_error(result, "pytest-osmosis: no policy to answer the rollouts' model calls*")


def test_a_mistyped_rollout_path_suggests_the_near_file(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-rollout=rollouts/demo/mian.py")
    _usage_error(
        result,
        "--osmosis-rollout: file not found: rollouts/demo/mian.py; "
        "did you mean rollouts/demo/main.py?",
    )


def test_a_policy_that_fails_to_load_is_a_usage_error_without_an_exit_trace(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, "--osmosis-policy=policy.py:polcy")
    _usage_error(result, "--osmosis-policy: *polcy*")


def test_a_mistyped_policy_path_suggests_the_near_file(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, "--osmosis-policy=polcy.py:policy")
    _usage_error(result, "--osmosis-policy: file not found: polcy.py; did you mean policy.py?")


def test_a_rollout_in_a_missing_folder_names_the_nearest_folder(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    result = pytester.runpytest(DATASET, POLICY, "--osmosis-rollout=rollouts/dmeo/main.py")
    _usage_error(
        result,
        "--osmosis-rollout: file not found: rollouts/dmeo/main.py (there is no folder "
        "rollouts/dmeo); did you mean rollouts/demo/main.py?",
    )


def test_the_ini_twins_keep_working_and_the_command_line_wins(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace()
    pytester.makeini(
        "[pytest]\nosmosis_dataset = data/test.jsonl\nosmosis_policy = policy.py:policy\n"
        "osmosis_limit = 0\n"
    )
    _usage_error(pytester.runpytest(), "--osmosis-limit: must be >= 1, got '0'*")
    result = pytester.runpytest("--osmosis-limit=2")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["rows: 2  passed: 2  failed: 0 *"])


WORDS = [
    ("record_mode", "once"),
    ("progress", "line"),
    ("gate_undecided", "pass"),
    ("row_pass", "majority"),
    ("n", "auto"),
    ("ray", "local"),
]
"""An option and one word of its fixed list (a mode, a rule, a keyword)."""


def _settings(pytester: pytest.Pytester, stem: str, value: str, *, ini: bool) -> object:
    from pytest_osmosis.options import resolve_settings

    if ini:
        pytester.makepyprojecttoml(f'[tool.pytest.ini_options]\nosmosis_{stem} = "{value}"\n')
        return resolve_settings(pytester.parseconfig(DATASET, POLICY))
    flag = "--osmosis-" + stem.replace("_", "-")
    return resolve_settings(pytester.parseconfig(DATASET, POLICY, f"{flag}={value}"))


@pytest.mark.parametrize("ini", [False, True], ids=["command-line", "ini"])
@pytest.mark.parametrize(("stem", "word"), WORDS, ids=[stem for stem, _ in WORDS])
def test_an_options_words_are_read_in_any_case(
    workspace: Callable[..., Path], pytester: pytest.Pytester, stem: str, word: str, ini: bool
) -> None:
    workspace()
    upper = _settings(pytester, stem, f" {word.upper()} ", ini=ini)
    assert upper == _settings(pytester, stem, word, ini=ini)


CHOICES = [
    ("record_mode", "REPLAY", "invalid mode 'REPLAY'; choose one of none, once, new_episodes, all"),
    ("progress", "PLAIN", "invalid mode 'PLAIN'; choose one of off, auto, line, bar"),
    ("gate_undecided", "MAYBE", "invalid mode 'MAYBE'; choose one of fail, pass"),
    (
        "row_pass",
        "MOST",
        "invalid rule 'MOST'; expected one of all|any|majority|at_least:K|rate:R*",
    ),
]


@pytest.mark.parametrize("ini", [False, True], ids=["command-line", "ini"])
@pytest.mark.parametrize(("stem", "value", "error"), CHOICES, ids=[c[0] for c in CHOICES])
def test_a_word_outside_an_options_list_is_a_usage_error_naming_the_choices(
    workspace: Callable[..., Path],
    pytester: pytest.Pytester,
    stem: str,
    value: str,
    error: str,
    ini: bool,
) -> None:
    workspace()
    flag = "--osmosis-" + stem.replace("_", "-")
    if ini:
        pytester.makepyprojecttoml(f'[tool.pytest.ini_options]\nosmosis_{stem} = "{value}"\n')
        result = pytester.runpytest(DATASET, POLICY)
    else:
        result = pytester.runpytest(DATASET, POLICY, f"{flag}={value}")
    _usage_error(result, f"{flag}: {error}")
