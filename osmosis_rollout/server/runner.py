"""Run a rollout app under uvicorn with a staged drain on SIGTERM.

Uvicorn's own SIGTERM handling closes the listener first: long polls still open get their
answer, but every later poll is refused and the rollouts that finish during the lifespan
drain can never be fetched. A rolling restart would lose every rollout in flight.

:func:`run_rollout_app` owns the signal instead. The first SIGTERM (or SIGINT) starts the
server's drain while the listener stays open: admissions get ``503`` with ``Retry-After``,
result polls and cancels are served until every finished result has been fetched (or its
lease lapsed) or ``drain_timeout_sec`` passes; only then is uvicorn told to exit. A second
signal stops at once (uvicorn's graceful stop), a third SIGINT forces it.

Connections are served through :func:`~osmosis_rollout.server.connections.guarded_protocol`:
slow requests are timed out, connections past the cap shed, and ``accept()`` refused at the
open-file limit logged one line per interval.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import signal
import socket
from types import FrameType
from typing import Any

import uvicorn

from osmosis_rollout.server.app import rollout_server_of
from osmosis_rollout.server.auth import SERVER_API_KEY_ENV
from osmosis_rollout.server.connections import (
    HEADER_TIMEOUT_SEC,
    ConnectionGuard,
    RefusedAccepts,
    guarded_protocol,
)
from osmosis_rollout.server.shutdown import DEFAULT_DRAIN_TIMEOUT_SEC, KEEP_ALIVE_SEC

logger = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_SEC = 5.0
"""After the drain, how long uvicorn waits for open requests before cancelling them."""


class DrainingServer(uvicorn.Server):  # type: ignore[misc]  # uvicorn ships no stubs here
    """A ``uvicorn.Server`` whose first shutdown signal drains the rollout server first."""

    def __init__(
        self, config: uvicorn.Config, *, rollout_server: Any | None, drain_timeout_sec: float
    ) -> None:
        super().__init__(config)
        self.rollout_server = rollout_server
        self.drain_timeout_sec = drain_timeout_sec
        self.unfetched: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: concurrent.futures.Future[None] | None = None
        self.refused_accepts = RefusedAccepts()

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        """Remember the loop (the signal handler schedules the drain on it), then serve,
        logging refused accepts one line per interval."""
        self._loop = asyncio.get_running_loop()
        self.refused_accepts.install(self._loop)
        try:
            await super().serve(sockets)
        finally:
            self.refused_accepts.report()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """First signal: start the drain. Later ones: uvicorn's own stop (then force)."""
        if (
            self._draining is not None
            or self.should_exit
            or self.rollout_server is None
            or self.drain_timeout_sec <= 0
            or self._loop is None
        ):
            super().handle_exit(sig, frame)
            return
        self._draining = asyncio.run_coroutine_threadsafe(self._drain_then_exit(), self._loop)
        print(
            f"osmosis-rollout: {signal.Signals(sig).name}: draining for up to "
            f"{self.drain_timeout_sec:g}s (new rollouts get 503; results are still served); "
            "send it again to stop now",
            flush=True,
        )

    async def _drain_then_exit(self) -> None:
        assert self.rollout_server is not None
        try:
            self.unfetched = await self.rollout_server.drain_before_exit(self.drain_timeout_sec)
        except Exception:
            logger.exception("the staged drain failed; stopping now")
        finally:
            self.should_exit = True


def run_rollout_app(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    drain_timeout_sec: float = DEFAULT_DRAIN_TIMEOUT_SEC,
    log_level: str = "info",
    timeout_keep_alive: int = KEEP_ALIVE_SEC,
    rollout_server: Any | None = None,
    max_connections: int | None = None,
    header_timeout_sec: float = HEADER_TIMEOUT_SEC,
    sockets: list[socket.socket] | None = None,
) -> DrainingServer:
    """Serve ``app`` until a signal ends the staged drain; return the finished server.

    ``rollout_server`` defaults to the one behind ``app`` (pass it when ``app`` is wrapped
    in middleware). An app ``create_rollout_server`` did not build is served with
    uvicorn's own shutdown. ``drain_timeout_sec`` 0 disables the drain. Check
    ``.started`` on the result to tell a failed start from a stop. ``max_connections``
    (default: from the open-file limit) and ``header_timeout_sec`` set the
    :class:`~osmosis_rollout.server.connections.ConnectionGuard`. ``sockets``, already
    bound, are served instead of binding ``host``:``port``.
    """
    if not math.isfinite(drain_timeout_sec) or drain_timeout_sec < 0:
        raise ValueError(f"drain_timeout_sec must be finite and >= 0, got {drain_timeout_sec!r}")
    guard = ConnectionGuard(max_connections=max_connections, header_timeout_sec=header_timeout_sec)
    rollout_server = rollout_server if rollout_server is not None else rollout_server_of(app)
    if rollout_server is not None:
        rollout_server.connections = guard  # reported by /health
        key = rollout_server.secrets.get(SERVER_API_KEY_ENV)
        guard.credential = f"Bearer {key}".encode() if key else None
    config = uvicorn.Config(
        app,
        http=guarded_protocol(guard),
        host=host,
        port=port,
        timeout_keep_alive=timeout_keep_alive,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SEC,
        log_level=log_level,
        lifespan="on",
    )
    server = DrainingServer(
        config, rollout_server=rollout_server, drain_timeout_sec=drain_timeout_sec
    )
    server.run(sockets=sockets)
    return server


__all__ = [
    "DEFAULT_DRAIN_TIMEOUT_SEC",
    "GRACEFUL_SHUTDOWN_SEC",
    "KEEP_ALIVE_SEC",
    "DrainingServer",
    "rollout_server_of",
    "run_rollout_app",
]
