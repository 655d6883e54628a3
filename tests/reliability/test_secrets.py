"""Secrets: a plugin run with a provider key and the inbound API key set leaves neither in
any file it wrote (JSON report, HTML report, JUnit XML, cassettes, trajectories, artifacts,
logs), nor in its console output.

The provider key is really used: ``--osmosis-model openai/...`` goes to a fake provider on
loopback (our ``PolicyServer``, which demands that key as its bearer) through the ``openai``
SDK, or through LiteLLM with ``osmosis_force_litellm = true`` in the ini file, in
record mode, so cassettes are written from real provider traffic. The inbound key
(``OSMOSIS_ROLLOUT_API_KEY``) sits in the environment of the run. The workflow uses
``RolloutChatClient``, whose conversation becomes the trajectory. LiteLLM and the
workflow log at DEBUG into a log file under the output directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from osmosis_rollout.controller import PolicyServer

PROVIDER_KEY = "sk-provider-SECRET-5f1c0b7e9a2d4c36"
INBOUND_KEY = "inbound-SECRET-8e2a7d41c9b3"

MAIN_PY = """
import logging
from osmosis_rollout import AgentWorkflow, Grader
from osmosis_rollout.chat_client import RolloutChatClient

log = logging.getLogger("secrets_workflow")


class Ask(AgentWorkflow):
    async def run(self, ctx):
        log.debug("asking the policy: %s", ctx.prompt)
        chat = RolloutChatClient(ctx.prompt, streaming=False)
        reply = await chat.complete()
        log.debug("reply: %s", reply.message)


class Exact(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0 if ctx.label in (ctx.sample.messages[-1]["content"] or "") else 0.0)
"""


def provider(request: object) -> str:
    """The fake provider's model: always answers with the multiplication's result."""
    return "The answer is 42"


@pytest.mark.parametrize("route", ["openai", "litellm"])
def test_a_plugin_run_writes_neither_key_anywhere(tmp_path: Path, route: str) -> None:
    (tmp_path / "rollouts" / "secrets").mkdir(parents=True)
    (tmp_path / "rollouts" / "secrets" / "main.py").write_text(textwrap.dedent(MAIN_PY))
    (tmp_path / "data").mkdir()
    rows = [{"user_prompt": f"What is 6 times 7? ({i})", "ground_truth": "42"} for i in range(3)]
    (tmp_path / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ini = "[pytest]\n" + ("osmosis_force_litellm = true\n" if route == "litellm" else "")
    (tmp_path / "pytest.ini").write_text(ini)
    out = tmp_path / "out"

    with PolicyServer(provider, api_key=PROVIDER_KEY) as fake_provider:
        env = {
            **os.environ,
            "OPENAI_API_KEY": PROVIDER_KEY,
            "OPENAI_API_BASE": fake_provider.rollout_url("provider"),
            "OPENAI_BASE_URL": fake_provider.rollout_url("provider"),
            "OSMOSIS_ROLLOUT_API_KEY": INBOUND_KEY,
            "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(out / "artifact-root"),
            "LITELLM_LOG": "DEBUG",
        }
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "--osmosis-dataset=data/test.jsonl",
                "--osmosis-model=openai/gpt-4o-mini",
                "--osmosis-record-mode=all",
                f"--osmosis-cassette-dir={out / 'cassettes'}",
                f"--osmosis-output={out / 'run'}",
                f"--osmosis-report={out / 'report.json'}",
                f"--osmosis-html={out / 'report.html'}",
                f"--junitxml={out / 'junit.xml'}",
                f"--log-file={out / 'pytest.log'}",
                "--log-file-level=DEBUG",
            ],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        provider_calls = fake_provider.log("provider").calls

    console = proc.stdout + proc.stderr
    assert proc.returncode == 0, console[-4000:]
    # LiteLLM's own DEBUG lines show which way the calls went.
    assert ("LiteLLM completion()" in console + (out / "pytest.log").read_text()) is (
        route == "litellm"
    )
    # The provider key was really used: the fake provider accepted three calls with it.
    assert len(provider_calls) == 3 and all(c.error is None for c in provider_calls)

    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    kinds = {p.suffix for p in written}
    assert {".json", ".html", ".xml", ".log"} <= kinds, sorted(map(str, written))
    assert list((out / "cassettes").rglob("*")), "no cassette was written"
    assert any(p.name == "trajectory.json" for p in written), "no trajectory was written"
    for path in written:
        data = path.read_bytes()
        for secret in (PROVIDER_KEY, INBOUND_KEY):
            assert secret.encode() not in data, f"{secret[:12]}... leaked into {path}"
    for secret in (PROVIDER_KEY, INBOUND_KEY):
        assert secret not in console


LEAKY_MAIN_PY = """
import logging
import os
from pathlib import Path

import httpx
from osmosis_rollout import AgentWorkflow, Grader, get_rollout_context

log = logging.getLogger("leaky_workflow")


class Echo(AgentWorkflow):
    async def run(self, ctx):
        rollout = get_rollout_context()
        # The oracle: where the test learns the policy key, outside the files it greps.
        Path(os.environ["POLICY_KEY_ORACLE"]).write_text(rollout.api_key)
        async with httpx.AsyncClient(timeout=30) as client:
            response = await client.post(
                rollout.chat_completions_url + "/chat/completions",
                headers={"Authorization": f"Bearer {rollout.api_key}"},
                json={"model": "m", "messages": ctx.prompt},
            )
            reply = response.json()["choices"][0]["message"]["content"]
        log.warning("policy said %s (policy key %s)", reply, rollout.api_key)
        print(f"stdout: {reply} {rollout.api_key}")
        answer = f"{reply} policy-key={rollout.api_key}"
        return [*ctx.prompt, {"role": "assistant", "content": answer}]


class Raises(Grader):
    async def grade(self, ctx):
        if "raise" in ctx.label:
            raise ValueError(f"grader refused key {os.environ['OPENAI_API_KEY']}")
        ctx.set_reward(0.0)
"""

ECHO_POLICY_PY = """
import os


def policy(request):
    return (
        f"provider={os.environ['OPENAI_API_KEY']} inbound={os.environ['OSMOSIS_ROLLOUT_API_KEY']}"
    )
"""


def test_a_grader_raising_with_the_key_and_a_policy_echoing_it_leak_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    (root / "rollouts" / "leaky").mkdir(parents=True)
    (root / "rollouts" / "leaky" / "main.py").write_text(textwrap.dedent(LEAKY_MAIN_PY))
    (root / "policy.py").write_text(textwrap.dedent(ECHO_POLICY_PY))
    (root / "data").mkdir()
    rows = [
        {"user_prompt": f"row {i}", "ground_truth": "raise" if i % 2 else "x"} for i in range(4)
    ]
    (root / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "pytest.ini").write_text("[pytest]\n")
    oracle = tmp_path / "policy-key.txt"
    out = root / "out"
    env = {
        **os.environ,
        "OPENAI_API_KEY": PROVIDER_KEY,
        "OSMOSIS_ROLLOUT_API_KEY": INBOUND_KEY,
        "POLICY_KEY_ORACLE": str(oracle),
        "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(out / "artifact-root"),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-rA",
            "--osmosis-dataset=data/test.jsonl",
            "--osmosis-policy=policy.py:policy",
            f"--osmosis-output={out / 'run'}",
            f"--osmosis-report={out / 'report.json'}",
            f"--osmosis-html={out / 'report.html'}",
            f"--junitxml={out / 'junit.xml'}",
            f"--log-file={out / 'pytest.log'}",
            "--log-file-level=DEBUG",
        ],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    console = proc.stdout + proc.stderr
    assert proc.returncode == 1, console[-4000:]
    policy_key = oracle.read_text()
    assert len(policy_key) >= 16
    # The failures were really shown, with the secrets' names in place of their values.
    assert "grader refused key [REDACTED:OPENAI_API_KEY]" in console
    assert (
        "provider=[REDACTED:OPENAI_API_KEY] inbound=[REDACTED:OSMOSIS_ROLLOUT_API_KEY]" in console
    )

    written = [p for p in root.rglob("*") if p.is_file() and p.suffix != ".py"]
    names = {p.name for p in written}
    assert {
        "report.json",
        "report.html",
        "junit.xml",
        "pytest.log",
        "rows.jsonl",
        "rollouts.log",
    } <= names
    assert "trajectory.json" in names and "diagnostics.json" in names, sorted(names)
    secrets = {"provider key": PROVIDER_KEY, "inbound key": INBOUND_KEY, "policy key": policy_key}
    for path in written:
        data = path.read_bytes()
        for what, secret in secrets.items():
            assert secret.encode() not in data, f"the {what} leaked into {path}"
    for what, secret in secrets.items():
        assert secret not in console, f"the {what} leaked into the terminal"
    # The grader's traceback is in rollouts.log, redacted, not dropped.
    rollouts_log = next(p for p in written if p.name == "rollouts.log").read_text()
    assert "ValueError: grader refused key [REDACTED:OPENAI_API_KEY]" in rollouts_log
