"""The rollout scheduler: keyed submissions on the loop's one thread, the bound, cancellation,
and what a blocked or dead loop does to the rollouts waiting on it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from pytest_osmosis.run.scheduler import RolloutLoopBlocked, RolloutLoopStopped, RolloutScheduler


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


def test_an_exception_reaches_the_caller_as_it_was_raised(scheduler: RolloutScheduler) -> None:
    async def fails() -> None:
        raise ValueError("bad row")

    with pytest.raises(ValueError, match="bad row"):
        scheduler.submit("row#0", fails).result(timeout=10)


def test_a_submission_cancelled_while_it_waits_for_a_slot_never_starts(
    scheduler: RolloutScheduler,
) -> None:
    ran: list[int] = []
    release = threading.Event()

    async def work(i: int) -> int:
        ran.append(i)
        while not release.is_set():
            await asyncio.sleep(0.01)
        return i

    busy = [scheduler.submit(f"row-{i}#0", lambda i=i: work(i)) for i in range(2)]
    dropped = scheduler.submit("row-2#0", lambda: work(2))
    kept = scheduler.submit("row-3#0", lambda: work(3))
    while len(ran) < 2:  # both slots taken: the other two wait
        time.sleep(0.01)
    assert dropped.cancel()
    release.set()
    assert [scheduler.wait(f, 10) for f in [*busy, kept]] == [0, 1, 3]
    assert dropped.cancelled() and ran == [0, 1, 3]


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

    futures = [scheduler.submit(f"row-{i}#0", forever) for i in range(4)]
    assert scheduler.cancel_pending() == 4
    assert all(f.cancelled() for f in futures)


def test_every_rollout_runs_on_the_loops_own_thread_whoever_waits_for_it(
    scheduler: RolloutScheduler,
) -> None:
    ran_on: list[str] = []

    async def work() -> str:
        await asyncio.sleep(0.05)
        ran_on.append(threading.current_thread().name)
        return "done"

    assert scheduler.wait(scheduler.submit("row-0#0", work), 10) == "done"
    assert scheduler.run(work, 10) == "done"
    # Nobody waits for this one: it runs all the same.
    assert scheduler.submit("row-1#0", work).result(timeout=10) == "done"
    assert ran_on == ["osmosis-rollouts"] * 3


def test_rollouts_start_in_submission_order_and_never_more_than_the_bound_at_once(
    scheduler: RolloutScheduler,
) -> None:
    started: list[int] = []
    peak = [0]
    release = threading.Event()

    async def work(i: int) -> None:
        started.append(i)
        peak[0] = max(peak[0], scheduler.running)
        while not release.is_set():  # the first ones hold their slots until released
            await asyncio.sleep(0.01)

    futures = [scheduler.submit(f"row-{i}#0", lambda i=i: work(i)) for i in range(12)]
    while len(started) < scheduler.concurrency:
        time.sleep(0.01)
    release.set()
    for future in futures:
        scheduler.wait(future, 10)
    assert started == list(range(12))
    assert peak[0] == scheduler.concurrency


def test_wait_on_the_loops_own_thread_says_it_would_never_return(
    scheduler: RolloutScheduler,
) -> None:
    async def inner() -> str:
        return "inner"

    async def waits() -> str:
        return scheduler.wait(scheduler.submit("row-1#0", inner), 1)

    with pytest.raises(RuntimeError, match="on the loop's own thread"):
        scheduler.wait(scheduler.submit("row-0#0", waits), 10)


def test_a_wait_that_times_out_raises_and_leaves_the_rollout_running(
    scheduler: RolloutScheduler,
) -> None:
    release = threading.Event()

    async def slow() -> str:
        while not release.is_set():
            await asyncio.sleep(0.01)
        return "done"

    future = scheduler.submit("row#0", slow)
    with pytest.raises(concurrent.futures.TimeoutError):
        scheduler.wait(future, 0.2)
    assert not future.done()
    release.set()
    assert future.result(timeout=10) == "done"


def test_an_exception_escaping_the_loop_fails_every_pending_rollout_and_later_ones(
    scheduler: RolloutScheduler,
) -> None:
    async def escapes() -> None:
        asyncio.get_running_loop().call_soon(_raise_system_exit)
        await asyncio.sleep(60)

    async def sleeps() -> None:
        await asyncio.sleep(60)

    first = scheduler.submit("row-0#0", escapes)
    other = scheduler.submit("row-1#0", sleeps)
    with pytest.raises(RolloutLoopStopped, match="SystemExit"):
        scheduler.wait(first, 10)
    with pytest.raises(RolloutLoopStopped):
        other.result(timeout=10)
    with pytest.raises(RolloutLoopStopped, match="SystemExit"):
        scheduler.submit("row-2#0", sleeps).result(timeout=10)


def _raise_system_exit() -> None:
    raise SystemExit(3)


def test_rollouts_queued_on_a_loop_that_dies_are_closed_and_fail_with_its_cause(
    recwarn: pytest.WarningsRecorder,
) -> None:
    scheduler = RolloutScheduler(concurrency=1)
    blocking, release = threading.Event(), threading.Event()

    async def escapes() -> None:
        asyncio.get_running_loop().call_soon(_raise_system_exit)
        blocking.set()
        release.wait(10)  # sync code: the rows below are queued behind the exit meanwhile

    async def sleeps() -> None:
        await asyncio.sleep(60)

    try:
        first = scheduler.submit("row-0#0", escapes)
        assert blocking.wait(10)
        queued = [scheduler.submit(f"row-{i}#0", sleeps) for i in range(1, 4)]
        release.set()
        for future in [first, *queued]:
            with pytest.raises(RolloutLoopStopped, match="SystemExit"):
                future.result(timeout=10)
    finally:
        release.set()
        scheduler.close()
    gc.collect()  # a coroutine nobody closed warns when it is collected
    assert [str(w.message) for w in recwarn if issubclass(w.category, RuntimeWarning)] == []


def test_a_loop_blocked_past_the_block_limit_is_given_up_naming_the_blocking_line(
    scheduler: RolloutScheduler,
) -> None:
    release = threading.Event()
    scheduler.block_limit = 2.0  # well past a busy machine's pauses (the watchdog: 1 s)

    async def blocks() -> str:
        release.wait(60)  # sync code in an async def: the loop's thread is stuck here
        return "blocked"

    async def sleeps() -> str:
        await asyncio.sleep(60)
        return "slept"

    try:
        blocked = scheduler.submit("data.jsonl::row-0#0", blocks)
        other = scheduler.submit("data.jsonl::row-1#0", sleeps)
        with pytest.raises(RolloutLoopBlocked) as raised:
            scheduler.wait(blocked, 60)
        message = str(raised.value)
        assert message.startswith("the rollout event loop was blocked for "), message
        assert f"by data.jsonl::row-0#0 at {__file__}:" in message, message
        assert "in blocks: release.wait(60)" in message, message
        assert "longer than an item may wait (2s): the run gave up on the loop" in message
        with pytest.raises(RolloutLoopBlocked):
            scheduler.wait(other, 10)
        # The remaining rows end at once rather than each waiting out its deadline.
        with pytest.raises(RolloutLoopBlocked):
            scheduler.submit("data.jsonl::row-2#0", sleeps).result(timeout=0)
        with pytest.raises(RolloutLoopBlocked):
            scheduler.run(sleeps, 10)
        blocks = scheduler.blocks_between(0, time.monotonic())
        assert "data.jsonl::row-0#0" in [b.task for b in blocks]
    finally:
        release.set()


def test_close_does_not_wait_for_a_loop_blocked_right_now() -> None:
    scheduler = RolloutScheduler(concurrency=1)
    release = threading.Event()
    blocking = threading.Event()

    async def blocks() -> None:
        blocking.set()
        release.wait(60)

    try:
        future = scheduler.submit("row-0#0", blocks)
        assert blocking.wait(10)
        while not scheduler.blocks_between(0, time.monotonic()):  # the watchdog saw the block
            time.sleep(0.05)
        scheduler.close()
        assert future.cancelled()
        assert not release.is_set()  # close returned while the loop was still blocked
    finally:
        release.set()


# These need an interpreter's own main thread (signals), so each runs in a fresh one.

_CTRL_C_WHILE_WAITING = """
import asyncio, os, signal, threading
from pytest_osmosis.run.scheduler import RolloutScheduler

hit = []
original = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
interrupted = threading.Event()

async def rollout():
    try:
        for _ in range(3000):  # runs until the main thread was interrupted (30 s at most)
            if interrupted.is_set():
                break
            await asyncio.sleep(0.01)
    except BaseException as exc:  # a rollout's runtime catches everything user code raises
        hit.append(type(exc).__name__)
        raise
    return "done"

scheduler = RolloutScheduler(concurrency=1)
future = scheduler.submit("row#0", rollout)
try:
    threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
    scheduler.wait(future, 60)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted in", threading.current_thread().name)
    interrupted.set()
print("rollout:", future.result(timeout=10), hit)
scheduler.close()
now = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
print("handlers untouched:", now == original)
"""


def test_ctrl_c_while_waiting_stops_the_wait_and_never_reaches_the_rollout() -> None:
    out = _run_python(_CTRL_C_WHILE_WAITING)
    assert out.splitlines() == [
        "interrupted in MainThread",
        "rollout: done []",
        "handlers untouched: True",
    ], out


_CTRL_C_WHILE_BLOCKED = """
import asyncio, os, signal, threading, time
from pytest_osmosis.run.scheduler import RolloutScheduler

blocking = threading.Event()

async def rollout():
    blocking.set()
    time.sleep(600)  # a grader calling sync code: blocks the loop's thread for good

scheduler = RolloutScheduler(concurrency=1)
scheduler.block_limit = 3600.0  # the item deadline: far longer than anyone waits for Ctrl-C
future = scheduler.submit("row#0", rollout)
blocking.wait(60)
try:
    threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
    scheduler.wait(future, 600)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
while not scheduler.blocks_between(0, time.monotonic()):
    time.sleep(0.05)
scheduler.close()
print("closed:", future.cancelled())
"""


def test_ctrl_c_while_sync_code_blocks_the_loop_stops_the_run_without_waiting_for_it() -> None:
    # The blocked thread is a daemon: the interpreter exits without it.
    out = _run_python(_CTRL_C_WHILE_BLOCKED)
    assert out.splitlines() == ["interrupted", "closed: True"], out


def _run_python(source: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
