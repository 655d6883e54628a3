"""Overload against a real ``osmosis-rollout serve`` (issue 27, defect 1).

Many more rollouts than the server runs at once, all offered together through our
``RolloutClient``: what does not fit in the running limit and the short queue gets 429
with ``Retry-After`` at once, the client retries it, and every admitted rollout finishes
within its deadline (none fails by timeout; queue time counts against it).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import httpx
from serve_support import served, write_main

from osmosis_rollout.controller import RolloutClient
from osmosis_rollout.types import RolloutStatus

LIMIT = 4
ROLLOUTS = 120
SLEEP_SEC = 0.3
DEADLINE_SEC = 20.0


async def test_rollouts_past_the_limit_get_429_and_every_admitted_one_meets_its_deadline(
    tmp_path: Path,
) -> None:
    main_py = write_main(tmp_path / "rollout")
    options = ("--max-concurrent", str(LIMIT), "--result-wait-timeout-sec", "2")
    answers: Counter[int] = Counter()
    retry_after: list[str] = []

    async def count(response: httpx.Response) -> None:
        if response.request.method == "POST" and response.request.url.path == "/rollout":
            answers[response.status_code] += 1
            if response.status_code == 429:
                retry_after.append(response.headers.get("retry-after", ""))

    with served(main_py, tmp_path / "artifacts", *options, "--drain-timeout", "0") as (url, _):
        http = httpx.AsyncClient(
            timeout=30,
            limits=httpx.Limits(max_connections=None),
            event_hooks={"response": [count]},
        )
        async with RolloutClient(url, http_client=http) as client:

            async def one(i: int) -> RolloutStatus | str:
                handle = await client.run_rollout_async(
                    initial_messages=[{"role": "user", "content": "hi"}],
                    chat_completions_url="http://127.0.0.1:9/v1",
                    rollout_id=f"over-{i}",
                    label="x",
                    metadata={"sleep": SLEEP_SEC},
                    agent_timeout_sec=DEADLINE_SEC,
                )
                result = await handle
                return result.err_category or result.status

            async with asyncio.timeout(300):  # a bound against a hang, not a speed check
                outcomes = await asyncio.gather(*(one(i) for i in range(ROLLOUTS)))
            health = (await http.get(f"{url}/health")).json()
        await http.aclose()

    assert Counter(outcomes) == {RolloutStatus.SUCCESS: ROLLOUTS}
    assert answers[202] == ROLLOUTS
    assert answers[429] >= ROLLOUTS - LIMIT * 5  # the limit plus a queue of 4x it at first
    assert all(value.isdigit() and int(value) >= 1 for value in retry_after)
    assert health["admission"]["mode"] == "fixed"
    assert health["admission"]["limit"] == LIMIT
    assert health["concurrency"]["max_concurrent"] == LIMIT
