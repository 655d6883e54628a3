"""Loopback ports and waiting for a server's ``/health``."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Collection, Mapping

import httpx

HEALTHY_TIMEOUT = 180.0
"""Seconds a server may take to answer ``/health``: generous, since at a load of 20 on two
cores the framework imports alone took over 60 s (a server that exits fails at once)."""


class ServerNotHealthy(AssertionError):
    """A server exited, or did not answer ``/health`` in time; the message says which."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for a process that must be told its port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_healthy(
    url: str,
    *,
    process: subprocess.Popen[str] | subprocess.Popen[bytes] | None = None,
    headers: Mapping[str, str] | None = None,
    accept: Collection[int] = (200,),
    timeout: float = HEALTHY_TIMEOUT,
    describe: Callable[[], str] | None = None,
) -> None:
    """Poll ``GET {url}/health`` until it answers with a status in ``accept``.

    Raises :class:`ServerNotHealthy` when ``process`` exits first or ``timeout`` passes; the
    message ends with ``describe()`` (a log tail, say) when given.
    """
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    # One client for every poll: a client per poll loads the CA bundle each time (~20-50 ms of
    # CPU every 0.1 s, taken from the server that is starting up on the same cores).
    with httpx.Client(timeout=2, headers=dict(headers or {})) as client:
        while True:
            if process is not None and process.poll() is not None:
                problem = f"the server at {url} exited with {process.returncode} before serving"
                break
            try:
                status = client.get(f"{url}/health").status_code
                if status in accept:
                    return
                last = f"status {status}"
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                problem = (
                    f"{url}/health did not answer {sorted(accept)} within {timeout:g}s ({last})"
                )
                break
            time.sleep(0.1)
    raise ServerNotHealthy(problem + (f"\n{describe()}" if describe is not None else ""))
