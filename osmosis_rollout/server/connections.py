"""Shedding slow and idle clients: read timeouts and a cap on open connections.

Uvicorn times out idle keep-alive connections but never a request that is still arriving:
a client that sends its headers a byte at a time (slowloris), or a body at a trickle,
holds a connection and a file descriptor as long as it likes, and a thousand of them leave
no file for anyone, not even ``/health`` with the right key. :class:`ConnectionGuard`
watches every connection through a thin subclass of uvicorn's h11 protocol
(:func:`guarded_protocol`) and sheds:

- a request whose headers are not complete ``header_timeout_sec`` (10 s) after its first
  byte, or after the connection opened;
- a request body arriving slower than ``min_body_rate`` (1 KiB/s) on average once
  ``body_grace_sec`` (10 s) have passed since its headers;
- past ``max_connections`` (by default the open-file limit less an eighth, at least 64,
  kept for rollouts, files and outbound calls), the oldest *untrusted* connection that is
  not being answered, else the new one. A connection is trusted once its request headers
  carry the key, or once it completed a request not refused with 401 (any request when the
  server has no key): a controller's connections, busy or idle, are never shed for churn
  without the key. Nor is a new connection whose unread request carries the key (looked
  at with ``MSG_PEEK``), so a flood accepted in one go cannot close it before it is read.

When the process is out of open files anyway, :class:`RefusedAccepts` turns the event loop's
failed ``accept()`` calls (one traceback per connection waiting) into one warning line per
:data:`REFUSED_ACCEPT_LOG_INTERVAL_SEC`.

A slow *response* is legitimate: once a request has fully arrived (a long poll for a
result, say), its connection is never timed out nor shed. The inbound key is checked as
soon as the headers are complete (``BearerAuthMiddleware``), so a client without the key
holds a connection no longer than the header timeout.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import logging
import secrets
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

HEADER_TIMEOUT_SEC = 10.0
BODY_GRACE_SEC = 10.0
MIN_BODY_RATE = 1024.0
"""Bytes per second a request body must average once its grace period is over."""
SWEEP_INTERVAL_SEC = 0.5
MIN_RESERVED_FDS = 64
PEEK_BYTES = 8192
"""How much of an unread request is looked at for the key (headers come first)."""
REFUSED_ACCEPT_LOG_INTERVAL_SEC = 10.0
"""At most one line per this many seconds about connections ``accept()`` refused."""
_DONTWAIT = getattr(socket, "MSG_DONTWAIT", 0)
_OUT_OF_RESOURCES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


def default_max_connections() -> int:
    """The open-file limit less an eighth (at least :data:`MIN_RESERVED_FDS`), at least 16."""
    try:
        import resource
    except ImportError:  # not a Unix: no limit to read
        return 4096
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 65536
    return max(16, soft - max(MIN_RESERVED_FDS, soft // 8))


class Phase(enum.Enum):
    """Where one connection is in its request/response cycle."""

    HEADERS = "headers"
    """Opened, or a request started, and its headers not complete."""
    BODY = "body"
    """Headers complete, request body still arriving."""
    ANSWERING = "answering"
    """The request has arrived; the app is answering it (never shed)."""
    IDLE = "idle"
    """Between requests on a keep-alive connection."""


@dataclass(eq=False)
class _Connection:
    transport: asyncio.Transport
    phase: Phase = Phase.HEADERS
    since: float = field(default_factory=time.monotonic)
    body_bytes: int = 0
    trusted: bool = False
    """Completed a request the server did not refuse for want of the key."""

    def enter(self, phase: Phase) -> None:
        if phase is not self.phase:
            self.phase = phase
            self.since = time.monotonic()
            self.body_bytes = 0


class ConnectionGuard:
    """Every open connection of one server, its phase, and the shedding rules above."""

    def __init__(
        self,
        *,
        max_connections: int | None = None,
        header_timeout_sec: float = HEADER_TIMEOUT_SEC,
        body_grace_sec: float = BODY_GRACE_SEC,
        min_body_rate: float = MIN_BODY_RATE,
    ) -> None:
        if max_connections is not None and max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        if not header_timeout_sec > 0:
            raise ValueError(f"header_timeout_sec must be > 0, got {header_timeout_sec}")
        self.max_connections = max_connections or default_max_connections()
        self.header_timeout_sec = header_timeout_sec
        self.body_grace_sec = body_grace_sec
        self.min_body_rate = min_body_rate
        self.shed: Counter[str] = Counter()
        self.credential: bytes | None = None
        """``Bearer <key>`` as sent by a client with the server's key (None: no key)."""
        # Insertion order is opening order: the first sheddable one is the oldest. Trusted
        # connections move to their own table, so finding the one to shed never walks them.
        self._untrusted: dict[asyncio.Transport, _Connection] = {}
        self._trusted: dict[asyncio.Transport, _Connection] = {}
        self._sweeper: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._untrusted) + len(self._trusted)

    def opened(self, transport: asyncio.Transport) -> _Connection:
        """Track a new connection; past the cap, shed the oldest sheddable untrusted one."""
        connection = _Connection(transport)
        if len(self) >= self.max_connections:
            oldest = self._oldest_sheddable()
            if oldest is None:  # only trusted, answered or sending ones: refuse this one
                self.shed["over_connection_cap"] += 1
                transport.abort()
                return connection
            self._shed(oldest, "over_connection_cap")
        self._untrusted[transport] = connection
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().call_later(SWEEP_INTERVAL_SEC, self._sweep)
        return connection

    def _oldest_sheddable(self) -> _Connection | None:
        """The oldest untrusted connection neither being answered nor holding an unread
        request that carries the key."""
        for connection in self._untrusted.values():
            if connection.phase is not Phase.ANSWERING and not self._carries_key(
                connection.transport
            ):
                return connection
        return None

    def _carries_key(self, transport: asyncio.Transport) -> bool:
        unread = _unread_bytes(transport)
        return bool(unread) if self.credential is None else self.credential in unread

    def presented(self, connection: _Connection, headers: list[tuple[bytes, bytes]]) -> None:
        """``connection``'s request headers are complete: trust it now if they carry the key.

        Waiting for the response would leave it sheddable while its body arrives or the app
        answers, with its key already read out of the kernel where the peek looks for it
        (the official client writes the headers and the body of a request separately).
        """
        if self.credential is None:
            return  # no key to present: trusted when a request completes
        for name, value in headers:
            if name == b"authorization":
                if secrets.compare_digest(value, self.credential):
                    self.trust(connection)
                return

    def trust(self, connection: _Connection) -> None:
        """``connection`` presented the key or completed a request that was not refused: never
        shed it for the cap."""
        if connection.trusted or connection.transport not in self._untrusted:
            return  # trusted already, or shed or closed
        del self._untrusted[connection.transport]
        connection.trusted = True
        self._trusted[connection.transport] = connection

    def closed(self, transport: asyncio.Transport) -> None:
        """Forget a connection that is gone."""
        self._untrusted.pop(transport, None)
        self._trusted.pop(transport, None)

    def _shed(self, connection: _Connection, reason: str) -> None:
        self.shed[reason] += 1
        self.closed(connection.transport)
        connection.transport.abort()

    def _all(self) -> list[_Connection]:
        return [*self._untrusted.values(), *self._trusted.values()]

    def _sweep(self) -> None:
        now = time.monotonic()
        for connection in self._all():
            elapsed = now - connection.since
            if connection.phase is Phase.HEADERS and elapsed > self.header_timeout_sec:
                self._shed(connection, "header_timeout")
            elif (
                connection.phase is Phase.BODY
                and elapsed > self.body_grace_sec
                and connection.body_bytes < self.min_body_rate * elapsed
            ):
                self._shed(connection, "slow_body")
        self._sweeper = (
            asyncio.get_running_loop().call_later(SWEEP_INTERVAL_SEC, self._sweep)
            if len(self)
            else None
        )

    def snapshot(self) -> dict[str, Any]:
        """Open connections by phase, how many are trusted, the cap, and how many were shed
        and why."""
        phases = Counter(c.phase.value for c in self._all())
        return {
            "open": len(self),
            "trusted": len(self._trusted),
            "max_connections": self.max_connections,
            "by_phase": {phase.value: phases[phase.value] for phase in Phase},
            "shed": dict(self.shed),
        }


def _unread_bytes(transport: asyncio.Transport) -> bytes:
    """The first :data:`PEEK_BYTES` the client sent that the loop has not read yet."""
    sock = transport.get_extra_info("socket")
    fileno = sock.fileno() if sock is not None else -1
    if fileno < 0:
        return b""
    # A second socket object over the same descriptor (no dup: at the open-file limit there
    # may be no descriptor to spare), detached so that it never closes it.
    peek = socket.socket(fileno=fileno)
    try:
        return peek.recv(PEEK_BYTES, socket.MSG_PEEK | _DONTWAIT)
    except OSError:  # BlockingIOError: nothing sent; anything else: nothing worth keeping
        return b""
    finally:
        peek.detach()


class RefusedAccepts:
    """The event loop's exception handler: refused ``accept()`` calls become one line per interval.

    The first refusal is logged at once with the fix, later ones as a count once
    :attr:`interval_sec` has passed (and by :meth:`report` at the end). Every other exception
    goes to the handler that was in place before.
    """

    def __init__(self, interval_sec: float = REFUSED_ACCEPT_LOG_INTERVAL_SEC) -> None:
        self.interval_sec = interval_sec
        self.total = 0
        """Refused ``accept()`` calls since :meth:`install`."""
        self._unreported = 0
        self._reason = ""
        self._next_line = 0.0
        self._previous: Any = None
        self._limit = "unknown"

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Handle ``loop``'s exceptions, passing on those that are not refused accepts."""
        self._limit = _open_file_limit()  # read now: with no file left, even an import fails
        self._previous = loop.get_exception_handler()
        loop.set_exception_handler(self._handle)

    def _handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        error = context.get("exception")
        if (
            isinstance(error, OSError)
            and error.errno in _OUT_OF_RESOURCES
            and "accept" in str(context.get("message", ""))
        ):
            self.total += 1
            self._unreported += 1
            self._reason = error.strerror or str(error)
            now = time.monotonic()
            if now >= self._next_line:
                self._next_line = now + self.interval_sec
                self.report()
            return
        if _stale_accept_retry(context):
            return
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)

    def report(self) -> None:
        """Log the refusals not yet counted in a line (also when the server stops)."""
        if not self._unreported:
            return
        count, self._unreported = self._unreported, 0
        logger.warning(
            "new connections refused: accept() failed %d time(s) since the last report: %s "
            "(open-file limit %s); raise the limit (ulimit -n) or lower --max-connections "
            "(next report in %gs at most)",
            count,
            self._reason,
            self._limit,
            self.interval_sec,
        )


def _stale_accept_retry(context: dict[str, Any]) -> bool:
    """True for asyncio's retry of a refused ``accept()`` that fires after the listener closed.

    Each refusal schedules a retry a second later; at shutdown the listener is closed first,
    and every retry still pending then fails on the closed socket (``ValueError: Invalid file
    descriptor: -1``), thousands of tracebacks after a burst. Nothing is lost: the server is
    stopping. The handle's callback is read from asyncio's private ``_callback`` (the only
    way to tell the retry from any other callback).
    """
    callback = getattr(context.get("handle"), "_callback", None)
    return getattr(callback, "__name__", "") == "_start_serving" and isinstance(
        context.get("exception"), ValueError | OSError
    )


def _open_file_limit() -> str:
    try:
        import resource
    except ImportError:
        return "unknown"
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else str(soft)


def guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """Uvicorn's h11 protocol, reporting each connection's phase to ``guard``.

    Imported here, not at module level: the constants above are read by ``serve``'s
    argument parser, which must work without the ``server`` extra.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from osmosis_rollout.server.auth import REFUSED_SCOPE_KEY

    class GuardedH11Protocol(H11Protocol):  # type: ignore[misc]  # uvicorn: untyped base
        _guarded: _Connection

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._guarded = guard.opened(transport)

        def connection_lost(self, exc: Exception | None) -> None:
            guard.closed(self.transport)
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            tracked = self._guarded
            if tracked.phase is Phase.IDLE:
                tracked.enter(Phase.HEADERS)
            elif tracked.phase is Phase.BODY:
                tracked.body_bytes += len(data)
            super().data_received(data)
            self._follow_request()

        def on_response_complete(self) -> None:
            if not self.scope.get(REFUSED_SCOPE_KEY):
                guard.trust(self._guarded)
            super().on_response_complete()
            self._follow_request()

        def _follow_request(self) -> None:
            """Read the phase off h11's view of the client's side of the exchange."""
            theirs = self.conn.their_state
            if self._guarded.phase is Phase.HEADERS and theirs in (h11.SEND_BODY, h11.DONE):
                # Leaving HEADERS: this request's headers are complete and in the scope.
                guard.presented(self._guarded, self.scope["headers"])
            if theirs is h11.SEND_BODY:
                self._guarded.enter(Phase.BODY)
            elif theirs is h11.IDLE:
                if self.conn.our_state is h11.IDLE and self._guarded.phase is Phase.ANSWERING:
                    self._guarded.enter(Phase.IDLE)
            else:
                self._guarded.enter(Phase.ANSWERING)

    return GuardedH11Protocol


__all__ = [
    "BODY_GRACE_SEC",
    "HEADER_TIMEOUT_SEC",
    "MIN_BODY_RATE",
    "REFUSED_ACCEPT_LOG_INTERVAL_SEC",
    "ConnectionGuard",
    "Phase",
    "RefusedAccepts",
    "default_max_connections",
    "guarded_protocol",
]
