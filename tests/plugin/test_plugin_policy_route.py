"""Which route the plugin's policy endpoint answers on: in-process rows vs everything else.

The policy answers with the name of the thread it runs on. Rows run in-process through the
pooled rollout client are answered on the rollouts' own thread (no loopback hop); a rollout
that opens its own client, and a served rollout (``--osmosis-serve``, another process),
are answered by the loopback server's thread, as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from workspaces import MAIN_PY

from osmosis_rollout.runs.journal import RUN_FILENAME, RUN_SCHEMA

PREFLIGHT = 2
POLICY = "--osmosis-policy=policy.py:policy"

THREAD_POLICY = '''
import threading


async def policy(request):
    """Answer with where the call was served: the policy server's thread (named), or the
    rollouts' own loop (on the thread that runs it: pytest's while it waits, or the loop's)."""
    name = threading.current_thread().name
    if name.startswith("osmosis-policy-server"):
        return "served on " + name
    return f"served on the rollouts' loop ({name})"
'''

CHAT_CLIENT_MAIN = """
from osmosis_rollout import AgentWorkflow, AgentWorkflowContext, Grader, GraderContext
from osmosis_rollout.chat_client import RolloutChatClient


class AskOnce(AgentWorkflow):
    async def run(self, ctx: AgentWorkflowContext):
        await RolloutChatClient(ctx.prompt).complete()


class LabelIn(Grader):
    async def grade(self, ctx: GraderContext):
        answer = ctx.sample.messages[-1]["content"] or ""
        ctx.set_reward(1.0 if ctx.label in answer else 0.0)
"""


def rows(label: str) -> list[dict[str, str]]:
    return [{"user_prompt": f"question {i}", "ground_truth": label} for i in range(3)]


def test_rows_in_process_are_answered_on_the_rollouts_thread(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(rows("served on the rollouts' loop"), main=CHAT_CLIENT_MAIN, policy=THREAD_POLICY)
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.assert_outcomes(passed=3 + PREFLIGHT)


def test_with_shortcuts_off_rows_in_process_are_answered_on_loopback(
    workspace: Callable[..., Path], pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OSMOSIS_NO_SHORTCUTS", "1")
    workspace(rows("served on osmosis-policy-server:"), main=CHAT_CLIENT_MAIN, policy=THREAD_POLICY)
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.assert_outcomes(passed=3 + PREFLIGHT)


def test_a_rollout_with_its_own_client_is_answered_on_loopback(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(rows("served on osmosis-policy-server:"), main=MAIN_PY, policy=THREAD_POLICY)
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY)
    result.assert_outcomes(passed=3 + PREFLIGHT)


def test_a_served_rollout_is_answered_on_loopback(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    workspace(rows("served on osmosis-policy-server:"), main=CHAT_CLIENT_MAIN, policy=THREAD_POLICY)
    result = pytester.runpytest("--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-serve")
    result.assert_outcomes(passed=3 + PREFLIGHT)


def test_a_served_rollout_runs_on_the_port_its_server_chose_not_one_an_older_log_names(
    workspace: Callable[..., Path], pytester: pytest.Pytester
) -> None:
    root = workspace(
        rows("served on osmosis-policy-server:"), main=CHAT_CLIENT_MAIN, policy=THREAD_POLICY
    )
    log = root / "out" / "server.log"
    log.parent.mkdir()
    log.write_text("osmosis-rollout serve: an earlier run on http://127.0.0.1:9\n")
    # The earlier run's folder: its run.json makes it ours to reuse.
    (root / "out" / RUN_FILENAME).write_text(json.dumps({"schema": RUN_SCHEMA, "run_id": "r0"}))
    result = pytester.runpytest(
        "--osmosis-dataset=data/test.jsonl", POLICY, "--osmosis-serve", "--osmosis-output=out"
    )
    result.assert_outcomes(passed=3 + PREFLIGHT)
    ports = re.findall(r"serve: .* on http://127\.0\.0\.1:(\d+)", log.read_text())
    assert ports[0] == "9" and len(ports) == 2 and ports[1] not in ("0", "9")
