"""ASGI apps served for real: uvicorn on a loopback socket, in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

START_TIMEOUT = 10.0
"""Seconds uvicorn may take to start serving."""


@contextmanager
def uvicorn_thread(
    app: Any,
    *,
    lifespan: str = "on",
    stop_timeout: float = 30.0,
    **config: Any,
) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a daemon thread; yield its base URL.

    The socket is bound before uvicorn starts, so no other process can take the port in
    between. Leaving the block stops the server (its lifespan shutdown runs) and waits up to
    ``stop_timeout`` seconds for the thread, then forces the exit; ``config`` goes to
    ``uvicorn.Config`` over the defaults below.
    """
    settings: dict[str, Any] = {
        "log_level": "warning",
        # Keep-alive well past the clients' expiry (ours: 4 s) so the server never closes a
        # connection a client is about to reuse; a bounded graceful stop so the thread ends.
        "timeout_keep_alive": 75,
        "timeout_graceful_shutdown": 5,
        "backlog": 2048,
        **config,
    }
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan=lifespan, **settings)
    )
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="uvicorn-test", daemon=True
    )
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started:
            if time.monotonic() > deadline or not thread.is_alive():
                raise RuntimeError(f"uvicorn did not start within {START_TIMEOUT:g}s")
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=stop_timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(timeout=10)
        sock.close()
        assert not thread.is_alive(), "uvicorn did not stop"
