"""Keys handed to a real ``osmosis-rollout serve`` never reach its output, however printed.

Concurrent rollouts each print their own key in two writes (flushed between, while the other
rollout prints whole lines), base64-encoded (alone and in a Basic auth header) and
URL-encoded, and log it so; the inbound key given by ``--api-key`` alone likewise. The
server's output must hold none of these forms, and still show the lines, with markers.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from serve_process import served, write_main

from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.redaction import encoded_forms

INBOUND = "inbound/KEY+a1b2c3d4e5f6"
KEYS = [f"rk/{i}+SECRET={i:04d}-9f8e7d6c5b4a" for i in range(4)]

PRINTS_KEYS = """
import asyncio
import base64
import logging
import os
import sys
from urllib.parse import quote

from osmosis_rollout import AgentWorkflow, Grader, get_rollout_context

log = logging.getLogger("encoded")


class Prints(AgentWorkflow):
    async def run(self, ctx):
        key = get_rollout_context().api_key
        inbound = ctx.metadata["inbound"]
        for round in range(20):
            print("split:", key[:9], end="", flush=True)
            await asyncio.sleep(0.001)
            print(key[9:], flush=True)
            sys.stdout.write(f"{ctx.metadata['n']} whole line {round}\\n")
            await asyncio.sleep(0)
        print("b64:", base64.b64encode(key.encode()).decode())
        basic = base64.b64encode(f"user:{key}".encode()).decode()
        log.warning("header: Authorization: Basic %s", basic)
        print("url: https://example.invalid/cb?key=" + quote(key, safe=""))
        print("inbound b64:", base64.b64encode(inbound.encode()).decode())
        print("inbound url:", quote(inbound, safe=""))
        return [{"role": "assistant", "content": "ok"}]


class Judge(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""


async def test_split_base64_and_url_encoded_keys_never_reach_the_servers_output(
    tmp_path: Path,
) -> None:
    main_py = write_main(tmp_path / "rollout", PRINTS_KEYS)
    log = tmp_path / "serve.log"
    auth = {"Authorization": f"Bearer {INBOUND}"}
    options = ("--api-key", INBOUND, "--drain-timeout", "2")
    with served(main_py, log, *options, health_headers=auth) as (url, process):
        async with RolloutClient(url, api_key=INBOUND) as client:
            handles = [
                await client.run_rollout_async(
                    initial_messages=[{"role": "user", "content": "hi"}],
                    chat_completions_url="http://127.0.0.1:9/v1",
                    rollout_id=f"enc-{i}",
                    llm_api_key=key,
                    label="x",
                    grade=True,
                    metadata={"n": i, "inbound": INBOUND},
                )
                for i, key in enumerate(KEYS)
            ]
            results = await asyncio.gather(*handles)
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 60)
    output = log.read_text()
    assert [r.status.value for r in results] == ["success"] * len(KEYS), output[-3000:]
    marker = "[REDACTED:POLICY_API_KEY]"
    inbound_marker = "[REDACTED:OSMOSIS_ROLLOUT_API_KEY]"
    assert output.count(f"split: {marker}") == 20 * len(KEYS), output[-3000:]
    assert output.count(f"b64: {marker}") == len(KEYS)
    assert output.count(f"url: https://example.invalid/cb?key={marker}") == len(KEYS)
    assert output.count("header: Authorization: Basic ") == len(KEYS)
    assert output.count(f"inbound b64: {inbound_marker}") == len(KEYS)
    assert output.count(f"inbound url: {inbound_marker}") == len(KEYS)
    for secret in (INBOUND, *KEYS):
        for form in (secret, *encoded_forms(secret)):
            assert form not in output, f"{form!r} (of {secret!r}) leaked"
