"""``--osmosis-model``'s policy: its route (``--osmosis-force-litellm`` and its ini twin) and
its connection pool (one connection per rollout in flight, ``--osmosis-concurrency``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import multiply_rows

from osmosis_rollout.integrations._litellm import import_litellm
from pytest_osmosis.options import DEFAULT_CONCURRENCY, resolve_settings
from pytest_osmosis.run.policy_choice import choose_policy

SERVER = "http://127.0.0.1:9/v1"  # an OpenAI-compatible server of your own (never called here)


@pytest.fixture(scope="module", autouse=True)
def _litellm_loaded_first() -> None:
    """Import LiteLLM before pytester snapshots ``sys.modules`` (module scope runs first):
    choose_policy imports it, and a LiteLLM that pytester unloads after one test breaks the
    next test's plugin loading."""
    import_litellm()


@pytest.fixture(autouse=True)
def _model_server_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", SERVER)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-choice-0123456789")


@pytest.mark.parametrize(
    ("args", "ini", "route"),
    [
        ((), "", "openai"),
        (("--osmosis-force-litellm",), "", "litellm"),
        ((), "osmosis_force_litellm = true\n", "litellm"),
        ((), "osmosis_force_litellm = false\n", "openai"),
    ],
    ids=["default", "flag", "ini", "ini-off"],
)
def test_the_switch_keeps_every_model_call_on_litellm(
    pytester: pytest.Pytester, args: tuple[str, ...], ini: str, route: str
) -> None:
    pytester.makeini("[pytest]\n" + ini)
    config = pytester.parseconfig("--osmosis-model=openai/qwen3", *args)
    policy = choose_policy(config, resolve_settings(config))
    assert policy.route == route


@pytest.mark.parametrize(
    ("args", "size"), [((), DEFAULT_CONCURRENCY), (("--osmosis-concurrency=7",), 7)]
)
def test_the_model_pool_holds_one_connection_per_rollout_in_flight(
    pytester: pytest.Pytester, args: tuple[str, ...], size: int
) -> None:
    pytester.makeini("[pytest]\n")
    config = pytester.parseconfig("--osmosis-model=openai/qwen3", *args)
    policy = choose_policy(config, resolve_settings(config))
    assert (policy.route, policy.pool_size) == ("openai", size)


def test_replaying_a_models_cassettes_needs_no_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from osmosis_rollout.policy import RecordingPolicy

    monkeypatch.delenv("OPENAI_API_KEY")
    pytester.makeini("[pytest]\n")
    cassette = pytester.path / "cassettes" / "row-0" / "attempt-0.json"
    cassette.parent.mkdir(parents=True)
    cassette.write_text("{}")
    # The recording command with its record mode set to replay, as CI runs it without keys.
    config = pytester.parseconfig(
        "--osmosis-model=openai/qwen3",
        "--osmosis-record-mode=none",
        "--osmosis-cassette-dir=cassettes",
    )
    policy = choose_policy(config, resolve_settings(config))
    assert isinstance(policy, RecordingPolicy) and policy.mode == "none"
    # Told to call the model (no replay asked for), the missing key is still said up front.
    config = pytester.parseconfig(
        "--osmosis-model=openai/qwen3", "--osmosis-cassette-dir=cassettes"
    )
    with pytest.raises(pytest.UsageError, match="needs OPENAI_API_KEY"):
        choose_policy(config, resolve_settings(config))


def test_the_header_says_what_the_record_mode_does(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(multiply_rows(1))
    args = ("--osmosis-dataset=data/test.jsonl", "--osmosis-policy=policy.py:policy", "--co")
    # Nothing recorded yet: record mode none has nothing to replay, and the policy answers.
    result = pytester.runpytest(*args, "--osmosis-record-mode=none")
    result.stdout.fnmatch_lines(
        [
            "osmosis: *, policy policy.py:policy, record mode none (no cassettes: the policy "
            "answers),*"
        ]
    )
    cassette = pytester.path / "data" / "cassettes" / "row-0" / "attempt-0.json"
    cassette.parent.mkdir(parents=True)
    cassette.write_text("{}")
    result = pytester.runpytest(*args, "--osmosis-record-mode=none")
    result.stdout.fnmatch_lines(
        ["osmosis: *, policy policy.py:policy, replay only (record mode none),*"]
    )
    result = pytester.runpytest(*args, "--osmosis-record-mode=once")
    result.stdout.fnmatch_lines(["osmosis: *, policy policy.py:policy, record mode once,*"])
    result = pytester.runpytest(*args)
    assert "record mode" not in result.stdout.str()
