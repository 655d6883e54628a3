"""The scheduler's edges with signals: a signal at any point of a wait, and a signal a rollout
raises on the loop's thread. The scheduler never touches a signal handler: a signal always
stops the main thread's wait, never a rollout.

Each case needs an interpreter's own main thread (signal handlers run there), so each runs
in a fresh one.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

_SIGNAL_AT_EVERY_POINT = """
import asyncio, signal, sys, time
import pytest_osmosis.run.scheduler
from pytest_osmosis.run.scheduler import RolloutScheduler

mode = sys.argv[1]
SCHEDULER = pytest_osmosis.run.scheduler.__file__


def handler(signum, frame):  # what pytest (and the run's SignalWatch) install
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
    signum = (signal.SIGINT, signal.SIGTERM)[k % 2]
    count, where = [0], []

    def profiler(frame, event, arg):
        # A real signal at the k-th point of wait()'s own code where this thread could run
        # a signal's handler (entering a function, back from one). Inside the standard
        # library's Python-level locks a signal can leave one held, as in any Python program;
        # the main thread sleeps in the C-level acquire, where it is safe.
        if frame.f_code.co_filename != SCHEDULER or where:
            return
        if event in ("call", "return", "c_call", "c_return"):
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
    if outcome != f"interrupted by {signum}" or late:
        bad.append(f"the wait {outcome}, late: {late}")
    for each in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(each) is not handler:
            bad.append(f"{signal.Signals(each).name} handler changed to {signal.getsignal(each)}")
            signal.signal(each, handler)
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
print(points, problems)
"""


@pytest.mark.parametrize("mode", ["pending", "done"])
def test_a_signal_at_any_point_of_a_wait_interrupts_it_once_and_leaves_the_scheduler_usable(
    mode: str,
) -> None:
    # pending: the rollout still runs while the wait starts; done: it finished ahead.
    out = _run_python(_SIGNAL_AT_EVERY_POINT, mode)
    points, problems = out.split(" ", 1)
    assert int(points) > 8, out
    assert problems == "[]", out


_SIGNAL_FROM_A_ROLLOUT = """
import asyncio, signal, threading
from pytest_osmosis.run.scheduler import RolloutScheduler

received = []


def handler(signum, frame):
    received.append((signum, threading.current_thread().name))
    raise KeyboardInterrupt(signum)


signal.signal(signal.SIGTERM, handler)
scheduler = RolloutScheduler(concurrency=1)
waiting = threading.Event()


async def terminated():
    while not waiting.is_set():
        await asyncio.sleep(0.01)
    signal.raise_signal(signal.SIGTERM)  # e.g. a tool that kills its own process group
    await asyncio.sleep(0.05)
    return "ok"


future = scheduler.submit("row-0#0", terminated)
try:
    waiting.set()
    scheduler.wait(future, 10)
    print("not interrupted")
except KeyboardInterrupt:
    print("interrupted")
print(future.result(10), received)
scheduler.close()
"""


def test_a_signal_raised_on_the_loops_thread_is_handled_on_the_main_thread_not_in_the_rollout() -> (
    None
):
    out = _run_python(_SIGNAL_FROM_A_ROLLOUT)
    assert out.splitlines() == ["interrupted", "ok [(15, 'MainThread')]"], out


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
