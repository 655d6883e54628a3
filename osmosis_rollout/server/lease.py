"""Polling leases: the token a controller polls under, and the deadline its polls keep alive.

Only the SHA-256 of a token is stored. A lease's deadline starts at admission + timeout and is
pushed to ``now + timeout`` by every correctly-tokened poll that arrives before the rollout
finishes. A watcher task per lease calls ``on_expired`` at the deadline; once the result is
fixed the lease stops (no watcher) but stays to authenticate later polls.

A rollout with no lease raises :class:`UnknownLeaseError` (a ``KeyError``), as the official
SDK's lease manager does; a wrong token raises :class:`InvalidLeaseError`.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

TOKEN_BYTES = 32
"""Random bytes in a lease token (``secrets.token_urlsafe``)."""


class UnknownLeaseError(KeyError):
    """No lease is registered for the rollout id (``args[0]``): never admitted, or forgotten."""


class InvalidLeaseError(PermissionError):
    """A poll presented a token that is not the rollout's lease token."""


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", errors="surrogatepass")).digest()


@dataclass
class PollingLease:
    """One rollout's lease: the token digest, its deadline, and its watcher."""

    digest: bytes
    deadline: float
    active: bool = True
    renewed: asyncio.Event = field(default_factory=asyncio.Event)
    watcher: asyncio.Task[None] | None = None

    def authenticate(self, token: str) -> None:
        """Raise :class:`InvalidLeaseError` unless ``token`` is this lease's token."""
        if not secrets.compare_digest(self.digest, _digest(token)):
            raise InvalidLeaseError("invalid polling lease")

    def expired(self, now: float | None = None) -> bool:
        """True once the deadline has passed."""
        current = asyncio.get_running_loop().time() if now is None else now
        return current >= self.deadline


class LeaseManager:
    """Mints, renews, watches and stops the leases of one server."""

    def __init__(self, *, timeout_sec: float, on_expired: Callable[[str], Awaitable[None]]) -> None:
        if not math.isfinite(timeout_sec) or timeout_sec <= 0:
            raise ValueError(f"lease timeout must be finite and > 0, got {timeout_sec!r}")
        self.timeout_sec = timeout_sec
        self._on_expired = on_expired
        self._leases: dict[str, PollingLease] = {}

    def mint(self, rollout_id: str) -> str:
        """Create the lease of ``rollout_id``; return its token (shown once, never stored)."""
        if rollout_id in self._leases:
            raise ValueError(f"a lease is already registered for rollout {rollout_id!r}")
        token = secrets.token_urlsafe(TOKEN_BYTES)
        lease = PollingLease(_digest(token), asyncio.get_running_loop().time() + self.timeout_sec)
        self._leases[rollout_id] = lease
        lease.watcher = asyncio.create_task(
            self._watch(rollout_id, lease), name=f"osmosis-lease-{rollout_id}"
        )
        return token

    def get(self, rollout_id: str) -> PollingLease:
        """The lease of ``rollout_id`` (:class:`UnknownLeaseError` if none)."""
        try:
            return self._leases[rollout_id]
        except KeyError:
            raise UnknownLeaseError(rollout_id) from None

    def expired(self, rollout_id: str) -> bool:
        """True when the lease of ``rollout_id`` is watched and its deadline has passed."""
        lease = self.get(rollout_id)
        return lease.active and lease.expired()

    def authenticate(self, rollout_id: str, token: str) -> None:
        """Raise :class:`InvalidLeaseError` unless ``token`` is the lease token of ``rollout_id``."""
        self.get(rollout_id).authenticate(token)

    def renew(self, rollout_id: str, token: str) -> bool:
        """Authenticate ``token``; if the lease is still live, push its deadline; else False."""
        lease = self.get(rollout_id)
        lease.authenticate(token)
        now = asyncio.get_running_loop().time()
        if lease.expired(now):
            return False
        lease.deadline = now + self.timeout_sec
        lease.renewed.set()
        return True

    def stop(self, rollout_id: str) -> None:
        """Stop watching (the result is fixed); the lease still authenticates polls."""
        lease = self._leases.get(rollout_id)
        if lease is not None:
            self._stop(lease)

    def remove(self, rollout_id: str) -> None:
        """Forget the lease entirely (the rollout left the registry)."""
        lease = self._leases.pop(rollout_id, None)
        if lease is not None:
            self._stop(lease)

    async def close(self) -> None:
        """Stop every watcher and wait for them to end."""
        watchers = [lease.watcher for lease in self._leases.values() if lease.watcher]
        for lease in self._leases.values():
            self._stop(lease)
        self._leases.clear()
        await asyncio.gather(*watchers, return_exceptions=True)

    async def _watch(self, rollout_id: str, lease: PollingLease) -> None:
        loop = asyncio.get_running_loop()
        while lease.active:
            lease.renewed.clear()
            delay = max(0.0, lease.deadline - loop.time())
            try:
                await asyncio.wait_for(lease.renewed.wait(), delay)
            except TimeoutError:
                if lease.active and lease.expired():
                    await self._on_expired(rollout_id)
                    if lease.active and lease.expired():
                        return  # nothing left to expire; avoid spinning

    @staticmethod
    def _stop(lease: PollingLease) -> None:
        lease.active = False
        lease.renewed.set()
        watcher = lease.watcher
        if watcher is not None and watcher is not asyncio.current_task() and not watcher.done():
            watcher.cancel()


__all__ = ["TOKEN_BYTES", "InvalidLeaseError", "LeaseManager", "PollingLease", "UnknownLeaseError"]
