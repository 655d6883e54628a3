"""The policy endpoint binds one key to one rollout, seen from a real ``osmosis-rollout serve``.

A rollout served in a subprocess calls the controller's policy endpoint (``scoped_keys=True``,
as the plugin runs it) with the key it was handed: its own URL answers, another rollout's
URL refuses it with 401, and a rollout id the endpoint never bound gets 404.
"""

from __future__ import annotations

import asyncio
import signal
import textwrap
from pathlib import Path

from serve_support import served

from osmosis_rollout.controller import PolicyServer, RolloutClient

PROBING_MAIN = """
import httpx
from osmosis_rollout import AgentWorkflow, Grader, get_rollout_context

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


class Probe(AgentWorkflow):
    async def run(self, ctx):
        rollout = get_rollout_context()
        headers = {"Authorization": f"Bearer {rollout.api_key}"}
        codes = []
        async with httpx.AsyncClient(timeout=30) as client:
            for url in (rollout.chat_completions_url, *ctx.metadata["others"]):
                response = await client.post(url + "/chat/completions", headers=headers, json=BODY)
                codes.append(str(response.status_code))
        return [{"role": "assistant", "content": " ".join(codes)}]


class Judge(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""


async def test_a_served_rollout_reaches_its_own_policy_url_and_no_other(tmp_path: Path) -> None:
    (tmp_path / "rollout").mkdir()
    main_py = tmp_path / "rollout" / "main.py"
    main_py.write_text(textwrap.dedent(PROBING_MAIN))
    with (
        PolicyServer("hello", scoped_keys=True) as policy,
        served(main_py, tmp_path / "artifacts", "--drain-timeout", "2") as (url, process),
    ):
        key = policy.bind("mine")
        policy.bind("theirs")
        others = [policy.rollout_url("theirs"), policy.rollout_url("never-bound")]
        async with RolloutClient(url) as client:
            handle = await client.run_rollout_async(
                initial_messages=[{"role": "user", "content": "probe"}],
                chat_completions_url=policy.rollout_url("mine"),
                rollout_id="mine",
                llm_api_key=key,
                metadata={"others": others},
            )
            result = await handle
        calls = {rollout: policy.log(rollout).n_calls for rollout in ("mine", "theirs")}
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 60)

    assert result.status == "success", result.err_message
    assert result.sample is not None
    assert result.sample.messages[-1]["content"] == "200 401 404"
    assert calls == {"mine": 1, "theirs": 0}
