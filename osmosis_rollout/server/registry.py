"""The server's registry of rollouts: one entry per admitted id, from admission to removal.

An entry holds the rollout's live progress, its execution task, its fixed result (the wire
JSON object, once terminal), and its cancel disposition. One lock guards every entry; the
progress condition variables share it, so "check, then wait for a change" is atomic.

Lifecycle of an entry:

- ``register`` at admission (409 for an id still registered), then ``bind_task``;
- ``wait_for_result`` serves polls: 404 before 403, renewing the lease of a live rollout,
  waiting up to ``result_wait_timeout_sec`` for any status change;
- the result is fixed once, by whichever comes first: the execution task's own result, a
  lease expiry (watcher, late poll, or late completion), a cancellation, or a crash;
- after ``result_retention_sec`` (and once the execution task has ended) the entry is
  removed: polls get 404 and the id may be admitted again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from osmosis_rollout.context import RolloutProgress
from osmosis_rollout.server.lease import InvalidLeaseError, LeaseManager, UnknownLeaseError
from osmosis_rollout.transport.wire import status_only
from osmosis_rollout.types import RolloutErrorCategory, RolloutStatus

logger = logging.getLogger(__name__)

CANCELLED_QUEUED = "cancelled_queued"
CANCELLED_RUNNING = "cancelled_running"
NOT_FOUND = "not_found"
DISPOSITIONS = frozenset({CANCELLED_QUEUED, CANCELLED_RUNNING, NOT_FOUND})

WireResult = dict[str, Any]
"""A ``RolloutResultResponse`` as the JSON object the server sends."""


class UnknownRolloutError(KeyError):
    """No entry for this rollout id (never admitted, or removed after retention)."""


class DuplicateRolloutError(ValueError):
    """The rollout id is still registered (live, or within retention)."""


def lease_failure(rollout_id: str) -> WireResult:
    """The result fixed when a polling lease lapses."""
    return {
        **status_only(rollout_id, RolloutStatus.FAILURE),
        "err_message": "polling lease expired",
        "err_category": RolloutErrorCategory.LEASE_EXPIRED.value,
    }


def crash_failure(rollout_id: str) -> WireResult:
    """The result fixed when an execution task dies with an exception."""
    return {
        **status_only(rollout_id, RolloutStatus.FAILURE),
        "err_message": "rollout task crashed",
        "err_category": RolloutErrorCategory.INTERNAL_ERROR.value,
    }


def cancelled_result(rollout_id: str, *, started: bool) -> WireResult:
    """The result of a cancelled rollout (``err_message`` is null if it never started)."""
    return {
        **status_only(rollout_id, RolloutStatus.CANCELLED),
        "err_message": "cancelled" if started else None,
    }


@dataclass
class RolloutEntry:
    """One admitted rollout."""

    rollout_id: str
    progress: RolloutProgress
    admitted_at: float = field(default_factory=time.monotonic)
    result: WireResult | None = None
    task: asyncio.Task[None] | None = None
    cancel_disposition: str | None = None
    cancel_on_bind: bool = False
    delivered: bool = False
    """True once a poll has been answered with the fixed result."""

    @property
    def finished(self) -> bool:
        """True once the result is fixed."""
        return self.result is not None


BackendCancel = Callable[[str], Awaitable[str | None]]
"""Asks the backend to cancel one rollout: its disposition if it owns the cancel, else None."""


class RolloutRegistry:
    """Entries, leases and retention of one rollout server."""

    def __init__(
        self,
        *,
        result_wait_timeout_sec: float,
        polling_lease_timeout_sec: float,
        result_retention_sec: float,
        cancel_in_backend: BackendCancel,
        on_finish: Callable[[RolloutEntry], None] | None = None,
    ) -> None:
        check_timeouts(result_wait_timeout_sec, polling_lease_timeout_sec, result_retention_sec)
        self.result_wait_timeout_sec = result_wait_timeout_sec
        self.result_retention_sec = result_retention_sec
        self._cancel_in_backend = cancel_in_backend
        self._on_finish = on_finish
        self.entries: dict[str, RolloutEntry] = {}
        self.lock = asyncio.Lock()
        self.leases = LeaseManager(timeout_sec=polling_lease_timeout_sec, on_expired=self.expire)
        self._background: set[asyncio.Task[None]] = set()

    # -- admission -------------------------------------------------------------------------

    async def register(self, rollout_id: str) -> tuple[RolloutEntry, str]:
        """Add an entry and mint its lease; return the entry and the lease token."""
        async with self.lock:
            if rollout_id in self.entries:
                raise DuplicateRolloutError(rollout_id)
            entry = RolloutEntry(
                rollout_id=rollout_id,
                progress=RolloutProgress(changed=asyncio.Condition(self.lock)),
            )
            self.entries[rollout_id] = entry
            return entry, self.leases.mint(rollout_id)

    async def bind_task(self, entry: RolloutEntry, task: asyncio.Task[None]) -> None:
        """Attach the execution task; a cancel that came first is applied now."""
        async with self.lock:
            entry.task = task
            if entry.cancel_on_bind and not task.done():
                task.cancel()
        task.add_done_callback(functools.partial(self._on_task_done, entry))

    async def discard(self, entry: RolloutEntry) -> None:
        """Roll back a registration whose admission failed."""
        async with self.lock:
            if self.entries.get(entry.rollout_id) is entry:
                del self.entries[entry.rollout_id]
                self.leases.remove(entry.rollout_id)

    # -- results ---------------------------------------------------------------------------

    async def complete(self, entry: RolloutEntry, result: WireResult) -> bool:
        """Fix the execution's own result; a lapsed lease turns it into ``lease_expired``.

        Returns False when the result was already fixed or the lease had lapsed.
        """
        async with self.lock:
            if entry.finished or self.entries.get(entry.rollout_id) is not entry:
                return False
            expired = self.leases.expired(entry.rollout_id)
            self._finish(entry, lease_failure(entry.rollout_id) if expired else result)
            claimed = self._claim_cancel(entry) if expired else False
        if claimed:
            await self._cancel_execution(entry)
        return not expired

    async def wait_for_result(self, rollout_id: str, token: str) -> WireResult:
        """Serve one poll; raises UnknownRolloutError / InvalidLeaseError."""
        claimed = False
        async with self.lock:
            entry = self.entries.get(rollout_id)
            if entry is None:
                raise UnknownRolloutError(rollout_id)
            if entry.finished:
                self.leases.authenticate(rollout_id, token)
            elif not self.leases.renew(rollout_id, token):
                self._finish(entry, lease_failure(rollout_id))
                claimed = self._claim_cancel(entry)
            if entry.result is None:
                before = entry.progress.status
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.result_wait_timeout_sec):
                        await entry.progress.changed.wait_for(
                            lambda: entry.finished or entry.progress.status is not before
                        )
                self.leases.authenticate(rollout_id, token)
            if entry.result is not None:
                entry.delivered = True
            result = entry.result or status_only(rollout_id, entry.progress.status)
        if claimed:
            await self._cancel_execution(entry)
        return result

    async def expire(self, rollout_id: str) -> None:
        """The lease watcher's callback: fail and cancel a rollout whose lease lapsed."""
        async with self.lock:
            entry = self.entries.get(rollout_id)
            if entry is None or entry.finished or not self.leases.expired(rollout_id):
                return
            logger.warning("rollout %s: polling lease expired; cancelling it", rollout_id)
            self._finish(entry, lease_failure(rollout_id))
            claimed = self._claim_cancel(entry)
        if claimed:
            await self._cancel_execution(entry)

    def _finish(self, entry: RolloutEntry, result: WireResult) -> None:
        """Fix ``result`` (lock held): wake pollers, stop the lease, schedule removal."""
        entry.result = result
        entry.progress.status = RolloutStatus(result["status"])
        entry.progress.changed.notify_all()
        self.leases.stop(entry.rollout_id)
        self._spawn(self._remove_after_retention(entry), f"osmosis-retention-{entry.rollout_id}")
        if self._on_finish is not None:
            try:
                self._on_finish(entry)
            except Exception:
                logger.warning("rollout finish observer failed", exc_info=True)

    async def _remove_after_retention(self, entry: RolloutEntry) -> None:
        await asyncio.sleep(self.result_retention_sec)
        # A lease failure is fixed before execution cleanup ends: keep the id reserved
        # until then, so a late completion can never touch a re-admitted rollout.
        if entry.task is not None and not entry.task.done():
            await asyncio.wait({entry.task})
        async with self.lock:
            if self.entries.get(entry.rollout_id) is entry:
                del self.entries[entry.rollout_id]
                self.leases.remove(entry.rollout_id)

    def _on_task_done(self, entry: RolloutEntry, task: asyncio.Task[None]) -> None:
        if entry.finished:
            return
        if task.cancelled():
            result = cancelled_result(entry.rollout_id, started=False)
        elif task.exception() is not None:
            logger.error(
                "rollout %s: execution task crashed", entry.rollout_id, exc_info=task.exception()
            )
            result = crash_failure(entry.rollout_id)
        else:
            return
        self._spawn(self._publish_fallback(entry, result), f"osmosis-fallback-{entry.rollout_id}")

    async def _publish_fallback(self, entry: RolloutEntry, result: WireResult) -> None:
        async with self.lock:
            if self.entries.get(entry.rollout_id) is entry and not entry.finished:
                self._finish(entry, result)

    # -- cancel ----------------------------------------------------------------------------

    async def cancel(
        self, *, ids: Sequence[str] | None = None, prefix: str | None = None, all: bool = False
    ) -> dict[str, str]:
        """Cancel the selected rollouts; return each id's disposition."""
        to_cancel: list[RolloutEntry] = []
        dispositions: dict[str, str] = {}
        async with self.lock:
            if all:
                selected = list(self.entries)
            elif prefix is not None:
                selected = [rid for rid in self.entries if rid.startswith(prefix)]
            else:
                selected = list(ids or [])
            for rollout_id in selected:
                entry = self.entries.get(rollout_id)
                if entry is None or entry.finished:
                    dispositions[rollout_id] = NOT_FOUND
                    continue
                if self._claim_cancel(entry):
                    to_cancel.append(entry)
                assert entry.cancel_disposition is not None
                dispositions[rollout_id] = entry.cancel_disposition
        for entry in to_cancel:
            dispositions[entry.rollout_id] = await self._cancel_execution(entry)
        return dispositions

    @staticmethod
    def _claim_cancel(entry: RolloutEntry) -> bool:
        """Record the first cancel's disposition (lock held); True if this call made it."""
        if entry.cancel_disposition is not None:
            return False
        queued = entry.progress.status is RolloutStatus.QUEUED
        entry.cancel_disposition = CANCELLED_QUEUED if queued else CANCELLED_RUNNING
        return True

    async def _cancel_execution(self, entry: RolloutEntry) -> str:
        """Let the backend cancel (if it owns the rollout), else cancel the execution task."""
        try:
            answer = await self._cancel_in_backend(entry.rollout_id)
        except Exception:
            logger.exception("rollout %s: backend cancellation failed", entry.rollout_id)
            answer = None
        if answer in DISPOSITIONS:
            # The backend ends execute() itself; cancelling its caller would cut its cleanup.
            entry.cancel_disposition = answer
            return answer
        task = entry.task
        if task is None:
            entry.cancel_on_bind = True
        elif task is not asyncio.current_task() and not task.done() and not task.cancelling():
            task.cancel()
        assert entry.cancel_disposition is not None
        return entry.cancel_disposition

    # -- draining --------------------------------------------------------------------------

    def awaiting_controller(self) -> list[str]:
        """Ids a controller may still come for: running, or finished but never fetched.

        A finished result nobody fetched stops counting once its lease (as last renewed
        by a poll) has lapsed: its controller is gone. Used by the staged drain.
        """
        waiting = []
        for rollout_id, entry in self.entries.items():
            if entry.result is None:
                waiting.append(rollout_id)
            elif not entry.delivered and entry.result.get("err_category") != "lease_expired":
                try:
                    lapsed = self.leases.get(rollout_id).expired()
                except UnknownLeaseError:
                    lapsed = True
                if not lapsed:
                    waiting.append(rollout_id)
        return waiting

    # -- lifecycle -------------------------------------------------------------------------

    def _spawn(self, coro: Any, name: str) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        """Stop lease watchers and retention timers (the server is shutting down)."""
        await self.leases.close()
        pending = [task for task in self._background if not task.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def check_timeouts(wait: float, lease: float, retention: float) -> None:
    """Validate the server's timing parameters; ``ValueError`` naming the bad one."""
    if not math.isfinite(wait) or wait <= 0:
        raise ValueError(f"result_wait_timeout_sec must be finite and > 0, got {wait!r}")
    if not math.isfinite(retention) or retention < 0:
        raise ValueError(f"result_retention_sec must be finite and >= 0, got {retention!r}")
    if not math.isfinite(lease):
        raise ValueError(f"polling_lease_timeout_sec must be finite, got {lease!r}")
    if lease <= wait:
        raise ValueError(
            f"polling_lease_timeout_sec ({lease!r}) must exceed result_wait_timeout_sec "
            f"({wait!r}), or every long poll would outlive its lease"
        )


__all__ = [
    "CANCELLED_QUEUED",
    "CANCELLED_RUNNING",
    "NOT_FOUND",
    "DuplicateRolloutError",
    "InvalidLeaseError",
    "RolloutEntry",
    "RolloutRegistry",
    "UnknownRolloutError",
    "WireResult",
    "cancelled_result",
    "check_timeouts",
    "crash_failure",
    "lease_failure",
]
