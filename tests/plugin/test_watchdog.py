"""The loop watchdog names the task and the line that kept the loop from answering.

The tests that make a block use a short threshold (:data:`SHORT`) and block several times
longer, so a busy machine only makes the block longer; the test that expects no block keeps the
production threshold, which a busy machine's pauses stay under.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from pytest_osmosis.run.watchdog import BLOCKED_AFTER_SEC, LoopBlock, LoopWatchdog

SHORT = 0.2
"""The threshold of the tests that block the loop (BLOCKED_AFTER_SEC in production)."""
BLOCK = 1.0
"""How long those tests block it: five thresholds."""


@pytest.fixture(params=[SHORT])
def watched(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[asyncio.AbstractEventLoop, LoopWatchdog]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    watchdog = LoopWatchdog(loop, thread, blocked_after=request.param)
    watchdog.start()
    try:
        yield loop, watchdog
    finally:
        watchdog.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


async def _blocks(seconds: float) -> None:
    time.sleep(seconds)


def test_a_blocking_task_is_named_with_its_line(
    watched: tuple[asyncio.AbstractEventLoop, LoopWatchdog],
) -> None:
    loop, watchdog = watched
    start = time.monotonic()

    async def run() -> None:
        asyncio.current_task().set_name("data.jsonl::row-7#0")  # type: ignore[union-attr]
        await _blocks(BLOCK)

    asyncio.run_coroutine_threadsafe(run(), loop).result(10)
    blocks = watchdog.blocks_between(start, time.monotonic())
    assert len(blocks) == 1
    block = blocks[0]
    assert block.task == "data.jsonl::row-7#0"
    assert block.where.endswith("in _blocks: time.sleep(seconds)")
    assert __file__ in block.where
    assert block.describe().startswith("the rollout event loop was blocked for ")


@pytest.mark.parametrize("watched", [BLOCKED_AFTER_SEC], indirect=True)
def test_an_idle_or_busy_but_answering_loop_is_not_blocked(
    watched: tuple[asyncio.AbstractEventLoop, LoopWatchdog],
) -> None:
    loop, watchdog = watched
    start = time.monotonic()

    async def cooperative() -> None:
        for _ in range(40):
            await asyncio.sleep(0.05)

    asyncio.run_coroutine_threadsafe(cooperative(), loop).result(10)
    assert watchdog.blocks_between(start, time.monotonic()) == []


def test_a_block_is_seen_while_it_lasts_not_only_once_the_loop_answers(
    watched: tuple[asyncio.AbstractEventLoop, LoopWatchdog],
) -> None:
    """A rollout that fails the instant the loop answers again must already see the block."""
    loop, watchdog = watched
    start = time.monotonic()
    seen_inside: list[int] = []

    async def run() -> None:
        asyncio.current_task().set_name("data.jsonl::row-3#0")  # type: ignore[union-attr]
        time.sleep(BLOCK)  # the watchdog notices within SHORT + 0.25 s, while this still blocks
        seen_inside.append(len(watchdog.blocks_between(start, time.monotonic())))

    asyncio.run_coroutine_threadsafe(run(), loop).result(10)
    assert seen_inside == [1]
    (block,) = watchdog.blocks_between(start, time.monotonic())
    assert block.task == "data.jsonl::row-3#0"


def test_a_loop_that_is_not_running_is_not_blocked() -> None:
    # Not started yet, or stopped (e.g. by an exception that escaped it): silence is no block.
    loop = asyncio.new_event_loop()
    idle_thread = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
    idle_thread.start()
    watchdog = LoopWatchdog(loop, idle_thread, blocked_after=SHORT)
    start = time.monotonic()
    watchdog.start()
    try:
        time.sleep(BLOCK)
        assert watchdog.blocks_between(start, time.monotonic()) == []
        assert watchdog.ongoing() is None
    finally:
        watchdog.stop()
        loop.close()


def test_a_block_is_told_while_it_lasts_and_is_ongoing_until_the_loop_answers() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    told: list[LoopBlock] = []
    watchdog = LoopWatchdog(loop, thread, blocked_after=SHORT, on_block=told.append)
    watchdog.start()
    release = threading.Event()
    seen: list[LoopBlock | None] = []

    async def run() -> None:
        asyncio.current_task().set_name("data.jsonl::row-5#0")  # type: ignore[union-attr]
        release.wait(30)

    try:
        future = asyncio.run_coroutine_threadsafe(run(), loop)
        while not told:
            time.sleep(0.05)
        seen.append(watchdog.ongoing())
        release.set()
        future.result(10)
        while watchdog.ongoing() is not None:
            time.sleep(0.05)
    finally:
        release.set()
        watchdog.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
    assert {b.task for b in told} == {"data.jsonl::row-5#0"}
    assert all(b.where.endswith("in run: release.wait(30)") for b in told), told
    assert seen[0] is not None and seen[0].task == "data.jsonl::row-5#0"
