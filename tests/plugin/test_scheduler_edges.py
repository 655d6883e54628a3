"""The scheduler's edges while pytest's main thread runs the rollouts' loop: a signal at any
point of a wait, and a signal while sync code blocks the loop.

Each case needs an interpreter's own main thread (signal handlers run there), so each runs
in a fresh one.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

_SIGNAL_AT_EVERY_POINT = """
import asyncio, signal, sys, threading, time
from pytest_osmosis.scheduler import RolloutScheduler

mode = sys.argv[1]


def handler(signum, frame):  # what pytest (and the session's SignalWatch) install
    raise KeyboardInterrupt(signum)


signal.signal(signal.SIGINT, handler)
signal.signal(signal.SIGTERM, handler)
scheduler = RolloutScheduler(concurrency=2)


async def work():
    for _ in range(3):
        await asyncio.sleep(0.001)
    return "ok"


problems, points, k = [], 0, 0
while True:
    k += 1
    key = f"row-{k}#0"
    future = scheduler.submit(key, work)
    if mode == "done":
        future.result(10)
    if mode in ("done", "behind"):
        time.sleep(0.03)  # the loop's own thread takes the loop back meanwhile
    signum = (signal.SIGINT, signal.SIGTERM)[k % 2]
    count, where = [0], []

    def profiler(frame, event, arg):
        # A real signal at the k-th point where this thread could run a signal's handler
        # inside wait() (entering a function, back from one), whatever code runs there.
        if event in ("call", "return", "c_return") and not where:
            count[0] += 1
            if count[0] == k:
                where.append(f"{event} {frame.f_code.co_name}:{frame.f_lineno}")
                signal.raise_signal(signum)

    outcome = "returned"
    sys.setprofile(profiler)
    try:
        scheduler.wait(future, 10)
    except KeyboardInterrupt as exc:
        outcome = f"interrupted by {exc.args[0]}"
    finally:
        sys.setprofile(None)
    if not where:
        break
    points += 1
    late = []
    try:
        time.sleep(0.01)  # a signal still pending would be handled here
    except KeyboardInterrupt as exc:
        late.append(exc.args[0])
    bad = []
    if outcome != f"interrupted by {signum}":
        bad.append(f"the wait {outcome}, late: {late}")
    for each in (signal.SIGINT, signal.SIGTERM):
        # Between waits the scheduler may keep routing the signal (straight to handler).
        if signal.getsignal(each) not in (handler, scheduler._hold_handler):
            bad.append(f"{signal.Signals(each).name} handler left as {signal.getsignal(each)}")
            signal.signal(each, handler)
    if scheduler._claimer is not None or scheduler._held is not None or scheduler._in_loop:
        bad.append(f"left claimed={scheduler._claimer} held={scheduler._held}")
    if scheduler._drive._is_owned():
        bad.append("left the loop's lock held")
    try:
        if scheduler.wait(future, 10) != "ok":
            bad.append("a later wait got another result")
    except BaseException as exc:
        bad.append(f"a later wait raised {type(exc).__name__}")
    if bad:
        problems.append(f"signal at {where[0]}: {bad}")
        break
    scheduler.forget(key)
scheduler.close()
for each in (signal.SIGINT, signal.SIGTERM):
    if signal.getsignal(each) is not handler:
        problems.append(f"after close, {signal.Signals(each).name} has {signal.getsignal(each)}")
print(points, problems)
"""


@pytest.mark.parametrize("mode", ["pending", "behind", "done"])
def test_a_signal_at_any_point_of_a_wait_interrupts_it_once_and_leaves_the_loop_free(
    mode: str,
) -> None:
    # pending: the wait runs the loop; behind: it first takes the loop from the loop's own
    # thread; done: it waits for a rollout that finished ahead.
    out = _run_python(_SIGNAL_AT_EVERY_POINT, mode)
    points, problems = out.split(" ", 1)
    assert int(points) > 20, out
    assert problems == "[]", out


_CTRL_C_WHILE_BLOCKED = """
import asyncio, signal, threading, time
from pytest_osmosis.scheduler import LoopBlockedTooLong, RolloutScheduler

blocking = threading.Event()


async def rollout():
    while threading.current_thread() is not threading.main_thread():
        await asyncio.sleep(0.01)  # started before the main thread took the loop
    blocking.set()
    try:
        time.sleep(600)  # a grader calling sync code: blocks the loop the main thread runs
    except LoopBlockedTooLong as exc:
        return f"interrupted: {exc}"
    return "slept"


def ctrl_c():
    blocking.wait(60)
    # Once the block is seen, so the main thread is inside time.sleep (a signal just before
    # the sleep starts is handled only after it, as anywhere in Python). To the main thread,
    # as the kernel mostly delivers a terminal's Ctrl-C: one that lands on another thread
    # interrupts nothing the main thread is blocked in.
    for _ in range(600):
        if scheduler.blocks_between(0.0, time.monotonic()):
            break
        time.sleep(0.1)
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


scheduler = RolloutScheduler(concurrency=1)
scheduler.block_limit = 3600.0  # the item deadline: far longer than anyone waits for Ctrl-C
future = scheduler.submit("row#0", rollout)
threading.Thread(target=ctrl_c, daemon=True).start()
try:
    scheduler.wait(future, 600)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
print(future.result(timeout=60))
scheduler.close()
"""


def test_ctrl_c_while_sync_code_blocks_the_loop_the_main_thread_runs_stops_the_wait() -> None:
    out = _run_python(_CTRL_C_WHILE_BLOCKED)
    assert out.splitlines() == [
        "interrupted",
        "interrupted: the rollout event loop was blocked when SIGINT arrived: interrupted the "
        "code that blocked it, so that the run can stop",
    ], out


def _run_python(source: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", source, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


_SECOND_SIGNAL_AS_THE_WAIT_ENDS = """
import asyncio, signal, sys, threading
from pytest_osmosis.scheduler import RolloutScheduler

received = []


def handler(signum, frame):
    received.append(signum)
    raise KeyboardInterrupt(signum)


signal.signal(signal.SIGINT, handler)
signal.signal(signal.SIGTERM, handler)
scheduler = RolloutScheduler(concurrency=1)


async def terminated():
    while threading.current_thread() is not threading.main_thread():
        await asyncio.sleep(0.01)  # started before the main thread took the loop
    signal.raise_signal(signal.SIGTERM)  # held: the main thread runs the loop
    await asyncio.sleep(0.01)
    return "ok"


def profiler(frame, event, arg):
    # Ctrl-C just as the wait hands the held SIGTERM over (the wait is over: not held).
    if event == "call" and frame.f_code.co_name == "_deliver_held":
        sys.setprofile(None)
        signal.raise_signal(signal.SIGINT)


future = scheduler.submit("row-0#0", terminated)
sys.setprofile(profiler)
try:
    scheduler.wait(future, 10)
except KeyboardInterrupt:
    pass
finally:
    sys.setprofile(None)


async def later():
    return "later"


try:
    print(scheduler.wait(scheduler.submit("row-1#0", later), 10), received)
except KeyboardInterrupt as exc:
    print("the next wait was interrupted by", exc.args[0], received)
scheduler.close()
"""


def test_a_second_signal_as_a_wait_ends_leaves_no_held_signal_for_the_next_wait() -> None:
    out = _run_python(_SECOND_SIGNAL_AS_THE_WAIT_ENDS)
    assert out in ("later [15]", "later [2]", "later [15, 2]"), out
