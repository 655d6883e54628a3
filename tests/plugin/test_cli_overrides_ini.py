"""On the command line an ``--osmosis-*`` flag overrides its ini twin, as everywhere in pytest.

``--osmosis-policy`` and ``--osmosis-model`` choose one policy: the one given on the command
line wins over the other's ini value; given both in one place they are refused.
"""

from __future__ import annotations

import pytest

from osmosis_rollout.integrations._litellm import import_litellm
from pytest_osmosis.options import resolve_settings
from pytest_osmosis.run.policy_choice import choose_policy

POLICY_FILE = "def policy(messages, **kwargs):\n    return 'scripted'\n"


@pytest.fixture(scope="module", autouse=True)
def _litellm_loaded_first() -> None:
    """Import LiteLLM before pytester snapshots ``sys.modules`` (see test_model_policy_choice)."""
    import_litellm()


@pytest.fixture(autouse=True)
def _model_server_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never called here
    monkeypatch.setenv("OPENAI_API_KEY", "sk-choice-0123456789")


def test_model_on_the_command_line_beats_a_policy_from_the_ini_file(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".py", policy=POLICY_FILE)
    pytester.makeini("[pytest]\nosmosis_policy = policy.py:policy\n")
    config = pytester.parseconfig("--osmosis-model=openai/qwen3")
    settings = resolve_settings(config)
    assert (settings.policy, settings.model) == (None, "openai/qwen3")
    assert type(choose_policy(config, settings)).__name__ == "LiteLLMPolicy"


def test_policy_on_the_command_line_beats_a_model_from_the_ini_file(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".py", policy=POLICY_FILE)
    pytester.makeini("[pytest]\nosmosis_model = openai/qwen3\n")
    config = pytester.parseconfig("--osmosis-policy=policy.py:policy")
    settings = resolve_settings(config)
    assert (settings.policy, settings.model) == ("policy.py:policy", None)
    assert type(choose_policy(config, settings)).__name__ != "LiteLLMPolicy"


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        (
            ("--osmosis-policy=policy.py:policy", "--osmosis-model=openai/qwen3"),
            "",
            r"^--osmosis-policy and --osmosis-model both given on the command line: ",
        ),
        (
            (),
            "osmosis_policy = policy.py:policy\nosmosis_model = openai/qwen3\n",
            r"^osmosis_policy and osmosis_model both set in .*tox\.ini: .* or pass one of "
            r"--osmosis-policy, --osmosis-model to override",
        ),
    ],
    ids=["command-line", "ini"],
)
def test_policy_and_model_from_the_same_place_are_refused(
    pytester: pytest.Pytester, args: tuple[str, ...], ini: str, message: str
) -> None:
    pytester.makefile(".py", policy=POLICY_FILE)
    pytester.makeini("[pytest]\n" + ini)
    config = pytester.parseconfig(*args)
    with pytest.raises(pytest.UsageError, match=message):
        resolve_settings(config)
