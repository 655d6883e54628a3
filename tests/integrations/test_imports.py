"""What importing the integrations costs, and what it says when a framework is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from osmosis_rollout.integrations._litellm import prepare_litellm_import


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    environ.update(env)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        # A hang guard only: a cold LiteLLM import takes minutes on a saturated 2-core machine.
        timeout=240,
        env=environ,
    )


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("openai_agents", "agents", "openai-agents"),
        ("strands", "strands", "strands"),
        ("openai_agents", "litellm", "openai-agents"),
        ("strands", "litellm", "strands"),
    ],
)
def test_a_missing_framework_fails_with_the_install_command(
    module: str, blocked: str, extra: str
) -> None:
    # A ModuleNotFoundError naming the module, as the official SDK raises (tests/interop).
    result = run_python(
        f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if it were not installed
        from osmosis_rollout.errors import MissingExtraError
        try:
            import osmosis_rollout.integrations.agents.{module}
        except MissingExtraError as exc:
            print(isinstance(exc, ModuleNotFoundError), exc.name)
            print(exc)
        """
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"True {blocked}"
    assert f'pip install "pytest-osmosis[{extra}]"' in result.stdout


def test_the_runtime_imports_no_framework() -> None:
    result = run_python(
        """
        import json, sys
        import osmosis_rollout, osmosis_rollout.integrations, osmosis_rollout.chat_client
        import osmosis_rollout.integrations.agents
        heavy = ["litellm", "agents", "strands", "fastapi", "openai"]
        print(json.dumps([name for name in heavy if name in sys.modules]))
        """
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == []


def test_litellm_is_imported_with_its_local_cost_map_and_no_fetch() -> None:
    # Both integration modules import LiteLLM through this helper before their framework does.
    result = run_python(
        """
        import os
        from osmosis_rollout.integrations._litellm import import_litellm
        import_litellm()
        print(os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"))
        """
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
    assert "cost map" not in result.stderr


def test_a_users_cost_map_choice_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "False")
    prepare_litellm_import()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "False"

    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP")
    prepare_litellm_import()
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
