"""Secrets handed to a real ``osmosis-rollout serve``: none reaches a byte the server writes.

A controller sends each rollout its own ``llm_api_key``; the server's environment holds its
inbound key (``OSMOSIS_ROLLOUT_API_KEY``) and a provider key named ``*_KEY``
(``AZURE_OPENAI_KEY``). The workflow prints them, writes them to stderr in pieces, logs them,
warns with them, prints a traceback holding them, logs a URL with credentials, and raises with
them. The server's output (stdout and stderr), every file under its artifact root and the
error message it answers must hold none of them, and still show the lines, with markers.
"""

from __future__ import annotations

import asyncio
import signal
import textwrap
from pathlib import Path

import pytest
from serve_support import served

from osmosis_rollout.controller import RolloutClient

INBOUND_KEY = "inbound-SECRET-3b9d1f0a7c52"
AZURE_KEY = "azure-SECRET-61e0c7a9d4f8b2"
URL_PASSWORD = "hunter2-SECRET-pw"
ROLLOUT_KEYS = {
    "ok": "rollout-key-SECRET-0a1b2c3d4e5f",
    "raise": "rollout-key-SECRET-9f8e7d6c5b4a",
}

LEAKY_MAIN = f"""
import logging
import os
import sys
import threading
import traceback
import warnings

from osmosis_rollout import AgentWorkflow, Grader, get_rollout_context

log = logging.getLogger("leaky_workflow")


class Leaky(AgentWorkflow):
    async def run(self, ctx):
        key = get_rollout_context().api_key
        azure = os.environ["AZURE_OPENAI_KEY"]
        inbound = os.environ["OSMOSIS_ROLLOUT_API_KEY"]
        print("printed:", key, azure, inbound)
        sys.stderr.write("stderr in pieces: " + key[:7])
        sys.stderr.write(key[7:] + "\\n")
        log.warning("logged: %s %s", key, "postgres://bob:{URL_PASSWORD}@db.internal/x")
        warnings.warn(f"warned about {{key}}")
        try:
            raise RuntimeError(f"caught with {{key}}")
        except RuntimeError:
            traceback.print_exc()
        thread = threading.Thread(target=print, args=("from a thread:", key))
        thread.start()
        thread.join()
        if ctx.metadata["mode"] == "raise":
            raise ValueError(f"workflow failed with {{key}} and {{azure}}")
        return [{{"role": "assistant", "content": f"answer holding {{key}}"}}]


class Judge(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""


async def _run_both(url: str) -> dict[str, dict[str, object]]:
    async with RolloutClient(url, api_key=INBOUND_KEY) as client:
        handles = {
            mode: await client.run_rollout_async(
                initial_messages=[{"role": "user", "content": "hi"}],
                chat_completions_url="http://127.0.0.1:9/v1/rollouts/" + mode,
                rollout_id=f"leaky-{mode}",
                llm_api_key=key,
                metadata={"mode": mode},
                grade=True,
            )
            for mode, key in ROLLOUT_KEYS.items()
        }
        return {mode: (await handle).model_dump(mode="json") for mode, handle in handles.items()}


async def test_keys_printed_logged_and_raised_by_a_workflow_never_reach_the_servers_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rollout").mkdir()
    main_py = tmp_path / "rollout" / "main.py"
    main_py.write_text(textwrap.dedent(LEAKY_MAIN))
    monkeypatch.setenv("OSMOSIS_ROLLOUT_API_KEY", INBOUND_KEY)
    monkeypatch.setenv("AZURE_OPENAI_KEY", AZURE_KEY)
    artifacts = tmp_path / "artifacts"
    log_path = tmp_path / "serve.log"
    with served(main_py, artifacts, "--drain-timeout", "2", log=log_path) as (url, process):
        results = await _run_both(url)
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 60)

    output = log_path.read_text()
    assert results["ok"]["status"] == "success", output[-3000:]
    assert results["raise"]["status"] == "failure", output[-3000:]
    # The lines were written, each secret replaced by its marker.
    marker = "[REDACTED:POLICY_API_KEY]"
    for line in (
        f"printed: {marker} [REDACTED:AZURE_OPENAI_KEY] [REDACTED:OSMOSIS_ROLLOUT_API_KEY]",
        f"stderr in pieces: {marker}",
        f"logged: {marker} postgres://***@db.internal/x",
        f"warned about {marker}",
        f"RuntimeError: caught with {marker}",
        f"from a thread: {marker}",
        f"ValueError: workflow failed with {marker} and [REDACTED:AZURE_OPENAI_KEY]",
    ):
        assert line in output, f"{line!r} not in the server's output:\n{output[-4000:]}"
    assert results["raise"]["err_message"] == (
        f"workflow failed with {marker} and [REDACTED:AZURE_OPENAI_KEY]"
    )

    secrets = [INBOUND_KEY, AZURE_KEY, URL_PASSWORD, *ROLLOUT_KEYS.values()]
    written = {log_path: log_path.read_bytes()}
    written.update({p: p.read_bytes() for p in artifacts.rglob("*") if p.is_file()})
    assert any(p.name == "trajectory.json" for p in written), sorted(map(str, written))
    for path, data in written.items():
        for secret in secrets:
            assert secret.encode() not in data, f"{secret} leaked into {path}"
    # The sample is the controller's training data, returned as the workflow made it.
    assert ROLLOUT_KEYS["ok"] in str(results["ok"]["sample"])


FLAG_KEY = "inbound-FLAG-SECRET-77c0e1d2"

READS_A_FILE_MAIN = """
from pathlib import Path

from osmosis_rollout import AgentWorkflow, Grader


class Echo(AgentWorkflow):
    async def run(self, ctx):
        secret = Path(ctx.metadata["secret_file"]).read_text()
        print("the file said", secret)
        raise RuntimeError(f"refusing {secret}")


class Judge(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""


OWN_APP = """
from osmosis_rollout import LocalBackend
from osmosis_rollout.server import create_rollout_server

app = create_rollout_server(backend=LocalBackend(workflow=Echo, grader=Judge))
"""


@pytest.mark.parametrize("own_app", [False, True], ids=["classes", "entrypoint-app"])
async def test_an_inbound_key_given_by_flag_alone_is_redacted_too(
    tmp_path: Path, own_app: bool
) -> None:
    (tmp_path / "rollout").mkdir()
    main_py = tmp_path / "rollout" / "main.py"
    main_py.write_text(
        textwrap.dedent(READS_A_FILE_MAIN) + (textwrap.dedent(OWN_APP) if own_app else "")
    )
    secret_file = tmp_path / "secret.txt"  # outside the artifact root and the log
    secret_file.write_text(FLAG_KEY)
    artifacts = tmp_path / "artifacts"
    log_path = tmp_path / "serve.log"
    options = ("--api-key", FLAG_KEY, "--drain-timeout", "2")
    with served(main_py, artifacts, *options, log=log_path) as (url, process):
        async with RolloutClient(url, api_key=FLAG_KEY) as client:
            handle = await client.run_rollout_async(
                initial_messages=[{"role": "user", "content": "hi"}],
                chat_completions_url="http://127.0.0.1:9/v1/rollouts/flag",
                rollout_id="flag",
                metadata={"secret_file": str(secret_file)},
            )
            result = await handle
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 60)

    output = log_path.read_text()
    assert "the file said [REDACTED:OSMOSIS_ROLLOUT_API_KEY]" in output, output[-3000:]
    assert result.err_message == "refusing [REDACTED:OSMOSIS_ROLLOUT_API_KEY]"
    for path in [log_path, *(p for p in artifacts.rglob("*") if p.is_file())]:
        assert FLAG_KEY.encode() not in path.read_bytes(), f"the key leaked into {path}"
