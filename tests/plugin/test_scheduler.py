"""The rollout scheduler: keyed submissions on its own loop, batched hand-offs, cancellation,
and who runs the loop (a waiting thread, else the loop's own)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from pytest_osmosis.scheduler import RolloutLoopStopped, RolloutScheduler


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


def test_a_waiting_thread_runs_the_loop_itself_and_nobody_waiting_leaves_it_to_its_thread(
    scheduler: RolloutScheduler,
) -> None:
    ran_on: list[str] = []

    async def work() -> str:
        # Its first step may run before the waiting thread takes the loop; not its last.
        await asyncio.sleep(0.5)
        ran_on.append(threading.current_thread().name)
        return "done"

    assert scheduler.wait(scheduler.submit("row-0#0", work), 10) == "done"
    ahead = scheduler.submit("row-1#0", work)
    # Nobody waits for this one: the loop's own thread takes the loop back and runs it.
    assert ahead.result(timeout=10) == "done"
    assert ran_on == [threading.current_thread().name, "osmosis-rollouts"]


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


def test_rollouts_keep_moving_while_the_waiting_thread_only_reports_finished_ones(
    scheduler: RolloutScheduler,
) -> None:
    # pytest reporting rows that finished ahead keeps the loop from its own thread, so those
    # waits must give the loop a pass now and then: the other rows' timers and I/O are due.
    async def quick() -> str:
        return "done"

    async def steps() -> str:
        for _ in range(5):
            await asyncio.sleep(0.02)
        return "done"

    finished = scheduler.submit("row-0#0", quick)
    assert scheduler.wait(finished, 10) == "done"
    pending = scheduler.submit("row-1#0", steps)
    give_up = time.monotonic() + 30
    while not pending.done() and time.monotonic() < give_up:
        assert scheduler.wait(finished, 10) == "done"
    assert pending.result(timeout=0) == "done"


def test_an_exception_escaping_the_loop_while_a_thread_waits_fails_every_pending_rollout(
    scheduler: RolloutScheduler,
) -> None:
    async def escapes() -> None:
        asyncio.get_running_loop().call_soon(_raise_system_exit)
        await asyncio.sleep(60)

    async def sleeps() -> None:
        await asyncio.sleep(60)

    with scheduler.batch():
        first = scheduler.submit("row-0#0", escapes)
        other = scheduler.submit("row-1#0", sleeps)
    with pytest.raises(RolloutLoopStopped, match="SystemExit"):
        scheduler.wait(first, 10)
    with pytest.raises(RolloutLoopStopped):
        other.result(timeout=10)


def _raise_system_exit() -> None:
    raise SystemExit(3)


# The next two need pytest's own main thread (signals), so each runs in a fresh interpreter.

_HELD_SIGNAL = """
import asyncio, os, signal, threading
from pytest_osmosis.scheduler import RolloutScheduler

hit = []

async def rollout():
    try:
        await asyncio.sleep(0.5)
    except BaseException as exc:  # a rollout's runtime catches everything user code raises
        hit.append(type(exc).__name__)
        raise
    return "done"

scheduler = RolloutScheduler(concurrency=1)
future = scheduler.submit("row#0", rollout)
threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
try:
    scheduler.wait(future, 10)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted in", threading.current_thread().name)
print("rollout:", future.result(timeout=10), hit)
scheduler.close()
"""


def test_ctrl_c_while_pytests_thread_runs_the_loop_reaches_its_handler_not_the_rollout() -> None:
    out = _run_python(_HELD_SIGNAL)
    assert out.splitlines() == ["interrupted in MainThread", "rollout: done []"], out


_ROUTED_BETWEEN_WAITS = """
import asyncio, os, signal
from pytest_osmosis.scheduler import RolloutScheduler

original = signal.getsignal(signal.SIGINT)

async def rollout():
    return "done"

scheduler = RolloutScheduler(concurrency=1)
print(scheduler.wait(scheduler.submit("row#0", rollout), 10))
try:
    os.kill(os.getpid(), signal.SIGINT)  # between waits: straight to the handler
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted between waits")
scheduler.close()
print("handler restored:", signal.getsignal(signal.SIGINT) is original)
"""


def test_ctrl_c_between_waits_stops_at_once_and_close_puts_the_handler_back() -> None:
    out = _run_python(_ROUTED_BETWEEN_WAITS)
    assert out.splitlines() == ["done", "interrupted between waits", "handler restored: True"], out


_BLOCKED = """
import asyncio, threading, time
from pytest_osmosis.scheduler import LoopBlockedTooLong, RolloutScheduler

async def rollout():
    while threading.current_thread() is not threading.main_thread():
        await asyncio.sleep(0.01)  # started before the main thread took the loop
    try:
        time.sleep(30)  # blocks the loop, which the waiting main thread runs
    except LoopBlockedTooLong as exc:
        return f"interrupted: {exc}"
    return "slept"

scheduler = RolloutScheduler(concurrency=1)
scheduler.block_limit = 1.0
print(scheduler.wait(scheduler.submit("row#0", rollout), 60))
scheduler.close()
"""


def test_code_blocking_the_loop_past_the_block_limit_is_interrupted_not_waited_for() -> None:
    out = _run_python(_BLOCKED).strip()
    assert out == (
        "interrupted: the rollout event loop was blocked for more than 1s: "
        "interrupted the code that blocked it"
    ), out


def _run_python(source: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
