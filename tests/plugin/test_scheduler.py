"""The rollout scheduler: keyed submissions on its own loop, batched hand-offs, cancellation."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator

import pytest

from pytest_osmosis.scheduler import RolloutScheduler


@pytest.fixture
def scheduler() -> Iterator[RolloutScheduler]:
    scheduler = RolloutScheduler(concurrency=2)
    try:
        yield scheduler
    finally:
        scheduler.close()


def test_a_submission_runs_on_the_loop_thread_once_per_key(scheduler: RolloutScheduler) -> None:
    calls: list[str] = []

    async def work() -> str:
        calls.append(threading.current_thread().name)
        return "done"

    first = scheduler.submit("row#0", work)
    assert scheduler.submit("row#0", work) is first
    assert first.result(timeout=10) == "done"
    assert calls == ["osmosis-rollouts"]


def test_submissions_in_a_batch_start_together_when_it_ends(scheduler: RolloutScheduler) -> None:
    started = threading.Event()

    async def work(i: int) -> int:
        started.set()
        return i * 10

    with scheduler.batch():
        futures = [scheduler.submit(f"row-{i}#0", lambda i=i: work(i)) for i in range(5)]
        # Nothing reached the loop yet: the batch hands them over as it closes.
        assert not started.wait(0.2)
        assert not any(f.done() for f in futures)
    assert [f.result(timeout=10) for f in futures] == [0, 10, 20, 30, 40]


def test_an_exception_reaches_the_caller_as_it_was_raised(scheduler: RolloutScheduler) -> None:
    async def fails() -> None:
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        scheduler.submit("row#0", fails).result(timeout=10)


def test_a_submission_cancelled_before_the_batch_ends_never_starts(
    scheduler: RolloutScheduler,
) -> None:
    ran: list[int] = []

    async def work(i: int) -> int:
        ran.append(i)
        return i

    with scheduler.batch():
        dropped = scheduler.submit("row-0#0", lambda: work(0))
        kept = scheduler.submit("row-1#0", lambda: work(1))
        assert dropped.cancel()
    assert kept.result(timeout=10) == 1
    assert dropped.cancelled() and ran == [1]


def test_cancelling_a_running_submission_cancels_its_task(scheduler: RolloutScheduler) -> None:
    running = threading.Event()
    cancelled = threading.Event()

    async def forever() -> None:
        running.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future = scheduler.submit("row#0", forever)
    assert running.wait(10)
    assert future.cancel()
    assert cancelled.wait(10)
    with pytest.raises(concurrent.futures.CancelledError):
        future.result(timeout=10)


def test_cancel_pending_stops_every_unfinished_submission(scheduler: RolloutScheduler) -> None:
    async def forever() -> None:
        await asyncio.sleep(60)

    with scheduler.batch():
        futures = [scheduler.submit(f"row-{i}#0", forever) for i in range(4)]
    assert scheduler.cancel_pending() == 4
    assert all(f.cancelled() for f in futures)
