"""Server CPU per rollout with the issue-27 redaction and observability in place, A/B by tree.

A ``create_rollout_server`` over ``LocalBackend`` (a workflow that answers at once, a grader)
served in-process through ``httpx.ASGITransport``, 64 rollouts in flight, each with its own
``llm_api_key`` (held by the server's ``LiveRedactor`` while it runs), INFO logging to
/dev/null through the redacting handlers, trajectories written. Prints the process CPU per
rollout; run it with each tree on ``PYTHONPATH``, alternating:

    PYTHONPATH=/path/to/tree .venv/bin/python bench/bench_server_secrets_cost.py 2000 /tmp/art
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from typing import Any

import httpx

from osmosis_rollout import AgentWorkflow, Grader, LocalBackend
from osmosis_rollout.server import create_rollout_server

TERMINAL = {"success", "failure", "cancelled"}
IN_FLIGHT = 64


class Answer(AgentWorkflow):
    async def run(self, ctx: Any) -> Any:
        return [{"role": "assistant", "content": "x"}]


class Reward(Grader):
    async def grade(self, ctx: Any) -> None:
        ctx.set_reward(1.0)


async def main(rollouts: int, artifact_root: str) -> None:
    backend = LocalBackend(workflow=Answer, grader=Reward)
    app = create_rollout_server(
        backend=backend, artifact_root=artifact_root, result_wait_timeout_sec=5
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://rollout") as client:
            slots = asyncio.Semaphore(IN_FLIGHT)

            async def one(i: int) -> None:
                async with slots:
                    admitted = await client.post(
                        "/rollout",
                        json={
                            "initial_messages": [{"role": "user", "content": "hi"}],
                            "rollout_id": f"r{i}",
                            "chat_completions_url": "http://127.0.0.1:9/v1",
                            "llm_api_key": f"key-{i:06d}-abcdefghijkl",
                            "grade": True,
                        },
                    )
                    lease = {"X-Osmosis-Rollout-Lease": admitted.json()["polling_lease_token"]}
                    while True:
                        polled = await client.get(f"/rollout/r{i}/result", headers=lease)
                        if polled.json()["status"] in TERMINAL:
                            return

            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(rollouts)))
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(f"{rollouts} rollouts: cpu {1e3 * cpu / rollouts:.3f} ms/rollout, wall {wall:.2f}s")


if __name__ == "__main__":
    logging.basicConfig(
        level=logging.INFO,
        stream=open(os.devnull, "w"),  # noqa: SIM115 - open for the process's life
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
