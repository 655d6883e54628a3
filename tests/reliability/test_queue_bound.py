"""The admission queue bound under a burst, on a real ``osmosis-rollout serve`` (issue 13, 5).

With 4 slots and ``--max-queue-depth 10``, a 300-request burst must admit exactly 14
(4 running, 10 queued) and answer the other 286 with 429 + ``Retry-After``: rollouts
admitted in the same burst count before they reach the limiter. (``serve`` runs its
default ``--max-concurrent auto`` here: the rollout's own 4 slots cap it.)
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import httpx
from serve_support import served, write_main

BURST = 300
DEPTH = 10
SLOTS = 4


def body(i: int) -> dict[str, object]:
    return {
        "initial_messages": [{"role": "user", "content": "hi"}],
        "rollout_id": f"burst-{i}",
        "chat_completions_url": "http://127.0.0.1:9/v1",
        "metadata": {"sleep": 600},
    }


async def test_a_300_request_burst_admits_exactly_the_slots_plus_the_queue_depth(
    tmp_path: Path,
) -> None:
    main_py = write_main(tmp_path / "rollout")
    # The cancelled rollouts' results are never fetched: a short drain, not the default 25 s.
    options = ("--max-queue-depth", str(DEPTH), "--drain-timeout", "2")
    with served(main_py, tmp_path / "artifacts", *options) as (url, process):
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=BURST)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
            responses = await asyncio.gather(
                *(http.post("/rollout", json=body(i)) for i in range(BURST))
            )
            codes = [response.status_code for response in responses]
            health = (await http.get("/health")).json()
            cancelled = await http.post("/rollout/cancel", json={"all": True})
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 60)

    assert codes.count(202) == SLOTS + DEPTH, sorted(set(codes))
    assert codes.count(429) == BURST - SLOTS - DEPTH
    for response in responses:
        if response.status_code == 429:
            # serve's admission control sets Retry-After near the queue's expected wait.
            assert int(response.headers["retry-after"]) >= 1
            assert response.json() == {"detail": "rollout queue is full; retry later"}
    assert health["max_queue_depth"] == DEPTH
    assert health["concurrency"]["running"] == SLOTS
    assert health["concurrency"]["queued"] == DEPTH
    assert cancelled.status_code == 200
    assert process.returncode == 0
