"""Staged drain of in-flight rollouts when the server's lifespan ends.

1. wait up to ``drain_sec`` (10 s) for the execution tasks to finish on their own;
2. cancel every registered rollout (the registry's ``cancel(all=True)`` path, so backends
   that own cancellation get to clean up) and wait up to ``cancel_wait_sec`` (120 s);
3. print a notice, hard-cancel the tasks still running, wait up to ``hard_cancel_wait_sec``.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

DEFAULT_DRAIN_TIMEOUT_SEC = 25.0
"""How long a SIGTERM's staged drain may keep serving results: a little under Kubernetes'
default 30 s termination grace period (see ``osmosis_rollout.server.runner``)."""

KEEP_ALIVE_SEC = 2160
"""Uvicorn ``timeout_keep_alive`` of a served rollout app: longer than the platform load
balancer's 2100 s idle timeout, and far longer than any client's keep-alive expiry (ours
is 4 s), so the server never closes a pooled connection a client is about to reuse."""


@dataclass(frozen=True)
class DrainPolicy:
    """How long each shutdown stage may take, in seconds (defaults match the official server)."""

    drain_sec: float = 10.0
    cancel_wait_sec: float = 120.0
    hard_cancel_wait_sec: float = 10.0

    def __post_init__(self) -> None:
        for name in ("drain_sec", "cancel_wait_sec", "hard_cancel_wait_sec"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"DrainPolicy.{name} must be finite and >= 0, got {value!r}")


async def drain_rollouts(
    tasks: Collection[asyncio.Task[Any]],
    cancel_all: Callable[[], Awaitable[Any]],
    policy: DrainPolicy = DrainPolicy(),
) -> int:
    """Run the three stages over ``tasks``; return how many had to be hard-cancelled."""
    pending = {task for task in tasks if not task.done()}
    if not pending:
        return 0
    logger.info("draining %d in-flight rollout(s)", len(pending))
    _, pending = await asyncio.wait(pending, timeout=policy.drain_sec)
    if not pending:
        return 0
    logger.info("cancelling %d rollout(s) that outlasted the drain", len(pending))
    await cancel_all()
    _, pending = await asyncio.wait(pending, timeout=policy.cancel_wait_sec)
    if not pending:
        return 0
    print(
        f"Rollout shutdown: cleanup is unconfirmed for {len(pending)} rollout(s) after "
        f"{policy.cancel_wait_sec}s; forcing cancellation.",
        flush=True,
    )
    for task in pending:
        task.cancel()
    await asyncio.wait(pending, timeout=policy.hard_cancel_wait_sec)
    return len(pending)


__all__ = ["DEFAULT_DRAIN_TIMEOUT_SEC", "KEEP_ALIVE_SEC", "DrainPolicy", "drain_rollouts"]
