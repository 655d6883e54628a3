"""Adaptive concurrency: how many rollouts a server runs, and how many it lets wait.

Past its CPU capacity a server that admits everything slows every rollout down together,
until all of them miss their deadline (congestion collapse). This module keeps the server
at the concurrency it can finish, with an AIMD limit in the manner of TCP and of Netflix's
concurrency-limits:

1. Every second it reads two congestion signals: the event-loop lag (how late a 25 ms
   timer fires on average: it grows once the process runs out of CPU) and the rollout
   latency (how long finished rollouts held their slot, smoothed, against the lowest
   smoothed latency seen, which drifts slowly up so that a new workload resets it).
2. When the lag is over its target (50 ms) two seconds running (one late second is a
   burst, such as many rollouts starting together) or the latency is over twice its
   baseline, the limit is multiplied by 0.8 (multiplicative decrease), never below 1.
3. Otherwise, if the rollouts running fill at least 90% of the limit (so the limit is
   what holds the work back), the limit grows: by half, from 64, until the first
   congestion (slow start), then by the square root of the limit (additive increase),
   never above the rollout's own ``max_concurrent`` when it sets one.
4. Beyond the rollouts running, a short queue may wait: as many as start within 10 s at
   the measured rate (the lower of the completions counted over the last 10 s and
   running / latency; one limit's worth until a rollout has finished), and only those
   expected to start and finish within 80% of their own ``agent_timeout_sec``; any other
   ``POST /rollout`` gets 429 at once (a comparison, before the admission lock), with a
   ``Retry-After`` near the queue's expected wait, spread by +-40% so that refused
   rollouts come back spread out.
5. The time a rollout waits in the queue counts against its agent deadline (the backend's
   budget is the timeout minus the queue time), which is why the queue is measured in
   seconds of waiting rather than in rollouts.

``--max-concurrent N`` fixes the limit at N (still capped by the rollout's own
``max_concurrent``) with the same queue; ``max_queue_depth``, when set, replaces the
queue bound. The limit and its signals are reported in ``/health`` (``admission``) and
``/metrics``.
"""

from __future__ import annotations

import asyncio
import collections
import math
import random
import time
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from osmosis_rollout._internal.limiter import ConcurrencyLimiter

MaxConcurrent = int | Literal["auto"]
"""``"auto"`` (adaptive) or a fixed number of rollouts running at once."""

AUTO: Literal["auto"] = "auto"


def parse_max_concurrent(value: object) -> MaxConcurrent:
    """``"auto"`` or a positive integer (also as a string); ``ValueError`` naming the value."""
    if value == AUTO:
        return AUTO
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_concurrent must be 'auto' or a positive integer, got {value!r}")
    return value


@dataclass(frozen=True)
class AimdPolicy:
    """The constants of the adaptive limit and the queue (see the module docstring)."""

    initial_limit: int = 64
    interval_sec: float = 1.0
    lag_probe_sec: float = 0.025
    lag_target_sec: float = 0.05
    lagging_intervals: int = 2
    latency_tolerance: float = 2.0
    backoff: float = 0.8
    slow_start_growth: float = 1.5
    utilisation: float = 0.9
    queue_window_sec: float = 10.0
    unmeasured_queue_factor: int = 1
    rate_window_sec: float = 10.0
    min_queue: int = 2
    deadline_margin: float = 0.8
    latency_smoothing: float = 0.1
    baseline_drift: float = 0.002
    retry_after_min_sec: int = 1
    retry_after_max_sec: int = 30
    retry_after_spread: float = 0.4


class SlotLatency:
    """How long finished rollouts held their slot: smoothed, and its slowly rising minimum."""

    def __init__(self, policy: AimdPolicy) -> None:
        self.policy = policy
        self.smoothed_sec: float | None = None
        self.baseline_sec: float | None = None

    def observe(self, seconds: float) -> None:
        """Fold one finished rollout's slot time in."""
        if self.smoothed_sec is None:
            self.smoothed_sec = seconds
        else:
            self.smoothed_sec += self.policy.latency_smoothing * (seconds - self.smoothed_sec)
        if self.baseline_sec is None or self.smoothed_sec < self.baseline_sec:
            self.baseline_sec = self.smoothed_sec
        else:
            self.baseline_sec += self.policy.baseline_drift * (
                self.smoothed_sec - self.baseline_sec
            )

    def congested(self) -> bool:
        """True when the smoothed latency is past the tolerance over its baseline."""
        return (
            self.smoothed_sec is not None
            and self.baseline_sec is not None
            and self.smoothed_sec > self.policy.latency_tolerance * self.baseline_sec
        )


class AimdLimit:
    """The adaptive limit itself: pure arithmetic over the signals it is given."""

    def __init__(self, *, ceiling: int | None, policy: AimdPolicy) -> None:
        self.policy = policy
        self.ceiling = ceiling
        self.limit = _clamp(policy.initial_limit, ceiling)
        self.slow_start = True
        self.state = "starting"
        self._late_intervals = 0

    def update(self, *, loop_lag_sec: float, latency_congested: bool, running: int) -> int:
        """One control step: grow, hold or back off; returns the new limit."""
        policy = self.policy
        lagging = loop_lag_sec > policy.lag_target_sec
        self._late_intervals = self._late_intervals + 1 if lagging else 0
        if self._late_intervals >= policy.lagging_intervals or latency_congested:
            self.limit = max(1.0, self.limit * policy.backoff)
            self.slow_start = False
            self.state = "backing_off"
        elif lagging:
            self.state = "holding"
        elif running >= policy.utilisation * math.floor(self.limit):
            grown = (
                self.limit * policy.slow_start_growth
                if self.slow_start
                else self.limit + math.sqrt(self.limit)
            )
            self.limit = _clamp(grown, self.ceiling)
            at_ceiling = self.ceiling is not None and self.limit >= self.ceiling
            self.state = "at_ceiling" if at_ceiling else "growing"
        else:
            self.state = "holding"
        return self.current

    @property
    def current(self) -> int:
        """The limit as a whole number of rollouts."""
        return max(1, math.floor(self.limit))


def _clamp(value: float, ceiling: int | None) -> float:
    """``value`` within ``[1, ceiling]`` (no upper bound without a ceiling)."""
    return max(1.0, min(value, ceiling) if ceiling is not None else value)


class LimitedBackend(Protocol):
    """What adaptive concurrency needs of a backend: its limiter and its waiting count."""

    limiter: ConcurrencyLimiter
    max_queue_depth: int | None

    @property
    def waiting(self) -> int:
        """Rollouts admitted but not holding a slot."""


def supports_concurrency_limit(backend: object) -> bool:
    """True for a backend whose rollouts run under a :class:`ConcurrencyLimiter` of its own."""
    return isinstance(getattr(backend, "limiter", None), ConcurrencyLimiter) and hasattr(
        backend, "waiting"
    )


class AdmissionControl:
    """The running limit and the queue of one server, and the decision to admit.

    ``mode`` is ``"auto"`` (an :class:`AimdLimit` driven by timers on the server's loop,
    started by :meth:`start`) or ``"fixed"``. The ceiling is the limit the backend was
    built with (the rollout's ``max_concurrent``; ``None`` when it sets none).
    """

    def __init__(
        self,
        backend: LimitedBackend,
        max_concurrent: MaxConcurrent,
        *,
        policy: AimdPolicy | None = None,
    ) -> None:
        self.backend = backend
        self.limiter = backend.limiter
        self.ceiling = self.limiter.max_concurrent
        self.mode: Literal["auto", "fixed"] = "auto" if max_concurrent == AUTO else "fixed"
        self.policy = policy or AimdPolicy()
        self.latency = SlotLatency(self.policy)
        self.aimd: AimdLimit | None = None
        self.loop_lag_sec = 0.0
        self._lag_total = 0.0
        self._lag_ticks = 0
        self._probe_due = 0.0
        self._probe_timer: asyncio.TimerHandle | None = None
        self._step_timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        if isinstance(max_concurrent, int):
            self.limiter.set_limit(int(_clamp(max_concurrent, self.ceiling)))
        else:
            self.aimd = AimdLimit(ceiling=self.ceiling, policy=self.policy)
            self.limiter.set_limit(self.aimd.current)
        self._finished: collections.deque[float] = collections.deque()
        self._first_finish: float | None = None
        self.limiter.on_release = self._on_release

    def _on_release(self, held_sec: float) -> None:
        now = time.monotonic()
        self.latency.observe(held_sec)
        self._finished.append(now)
        if self._first_finish is None:
            self._first_finish = now

    @property
    def limit(self) -> int:
        """Rollouts allowed to run at once now."""
        assert self.limiter.max_concurrent is not None
        return self.limiter.max_concurrent

    def _throughput(self) -> float | None:
        """Rollouts per second the server finishes, once one has: the lower of two views.

        Completions counted over the last :attr:`AimdPolicy.rate_window_sec` (what really
        drains the queue, but slow to see a change) and the running count over the latency
        (Little's law, at once, but blind to a limit about to shrink).
        """
        latency = self.latency.smoothed_sec
        if latency is None or self._first_finish is None:
            return None
        now = time.monotonic()
        window = self.policy.rate_window_sec
        while self._finished and self._finished[0] < now - window:
            self._finished.popleft()
        little = max(self.limiter.running, 1) / max(latency, 1e-3)
        counted_for = min(window, now - self._first_finish)
        if counted_for < 1.0:
            return little
        return min(little, max(len(self._finished), 1) / counted_for)

    @property
    def queue_bound(self) -> int:
        """Rollouts allowed to wait for a slot (``max_queue_depth`` when set)."""
        if self.backend.max_queue_depth is not None:
            return self.backend.max_queue_depth
        throughput = self._throughput()
        if throughput is None:
            bound = self.limit * self.policy.unmeasured_queue_factor
        else:
            bound = math.ceil(throughput * self.policy.queue_window_sec)
        return max(self.policy.min_queue, bound)

    def admits(self, agent_timeout_sec: float | None = None) -> bool:
        """True while one more rollout would run now, or wait in the queue and still finish.

        A rollout with ``agent_timeout_sec`` is queued only when its expected wait (its
        place in the queue at the measured rate) plus the measured latency fits within
        :attr:`AimdPolicy.deadline_margin` of it.
        """
        free = max(self.limit - self.limiter.running, 0)
        waiting = self.backend.waiting
        if waiting < free:
            return True
        if waiting >= free + self.queue_bound:
            return False
        throughput = self._throughput()
        if agent_timeout_sec is None or throughput is None or self.latency.smoothed_sec is None:
            return True
        expected_wait = (waiting - free + 1) / throughput
        finish = expected_wait + self.latency.smoothed_sec
        return finish <= self.policy.deadline_margin * agent_timeout_sec

    def retry_after(self) -> str:
        """Whole seconds for a refused rollout's ``Retry-After``: about the queue's wait."""
        policy = self.policy
        throughput = self._throughput()
        wait = self.backend.waiting / throughput if throughput else 1.0
        wait *= 1 + random.uniform(-policy.retry_after_spread, policy.retry_after_spread)
        seconds = min(max(round(wait), policy.retry_after_min_sec), policy.retry_after_max_sec)
        return str(seconds)

    # -- the control loop (auto only) ----------------------------------------------------

    def start(self) -> None:
        """Start the lag probe and the control timer on the running loop (idempotent)."""
        if self.aimd is None or self._loop is not None:
            return
        self._loop = asyncio.get_running_loop()
        self._schedule_probe()
        self._step_timer = self._loop.call_later(self.policy.interval_sec, self._step)

    def stop(self) -> None:
        """Stop the timers (the limit stays where it is)."""
        for timer in (self._probe_timer, self._step_timer):
            if timer is not None:
                timer.cancel()
        self._probe_timer = self._step_timer = None
        self._loop = None

    def _schedule_probe(self) -> None:
        assert self._loop is not None
        self._probe_due = time.monotonic() + self.policy.lag_probe_sec
        self._probe_timer = self._loop.call_later(self.policy.lag_probe_sec, self._probe)

    def _probe(self) -> None:
        self._lag_total += max(time.monotonic() - self._probe_due, 0.0)
        self._lag_ticks += 1
        if self._loop is not None:
            self._schedule_probe()

    def _step(self) -> None:
        assert self.aimd is not None
        if self._lag_ticks:
            self.loop_lag_sec = self._lag_total / self._lag_ticks
        self._lag_total, self._lag_ticks = 0.0, 0
        limit = self.aimd.update(
            loop_lag_sec=self.loop_lag_sec,
            latency_congested=self.latency.congested(),
            running=self.limiter.running,
        )
        self.limiter.set_limit(limit)
        if self._loop is not None:
            self._step_timer = self._loop.call_later(self.policy.interval_sec, self._step)

    def snapshot(self) -> dict[str, Any]:
        """The ``admission`` object of ``/health``."""
        return {
            "mode": self.mode,
            "limit": self.limit,
            "ceiling": self.ceiling,
            "queue_bound": self.queue_bound,
            "state": self.aimd.state if self.aimd is not None else "fixed",
            "loop_lag_sec": round(self.loop_lag_sec, 4),
            "latency_sec": _rounded(self.latency.smoothed_sec),
            "baseline_latency_sec": _rounded(self.latency.baseline_sec),
        }


def _rounded(value: float | None) -> float | None:
    return round(value, 4) if value is not None else None


__all__ = [
    "AUTO",
    "AdmissionControl",
    "AimdLimit",
    "AimdPolicy",
    "MaxConcurrent",
    "SlotLatency",
    "parse_max_concurrent",
    "supports_concurrency_limit",
]
