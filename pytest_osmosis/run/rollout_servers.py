"""Server mode's rollout servers: check the given URLs, start one with ``--osmosis-serve``, and
make the controller-side clients that admit and poll rollouts on them."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from osmosis_rollout.redaction import redact_url
from osmosis_rollout.runs.artifacts import ARTIFACT_ROOT_ENV
from osmosis_rollout.server.auth import SERVER_API_KEY_ENV
from pytest_osmosis.run.scheduler import RolloutScheduler

SERVE_START_TIMEOUT_SEC = 180.0
"""How long a started server may take to answer /health. Generous: importing a framework
takes over a minute on a busy machine, and a server that exits early is noticed at once."""
SERVE_STOP_TIMEOUT_SEC = 10.0

ROLLOUTS_PER_CLIENT = 16
"""Long polls each hold a connection, and httpx's pool scans all of its connections per
request, so one client per 16 rollouts in flight keeps the controller side cheap."""

_SERVING_ON = re.compile(rb"osmosis-rollout serve: .* on http://127\.0\.0\.1:(\d+)")
_SIGNAL_NAMES = {s.value: s.name for s in signal.Signals}


def _auth_headers() -> dict[str, str]:
    """The rollout server's inbound key (from the variable ``osmosis-rollout serve`` reads)."""
    key = os.environ.get(SERVER_API_KEY_ENV)
    return {"Authorization": f"Bearer {key}"} if key else {}


def check_servers(urls: list[str]) -> None:
    """Refuse to start when a rollout server does not answer ``GET /health``."""
    headers = _auth_headers()
    for url in urls:
        shown = redact_url(url)  # the URL's credentials are used, never shown
        try:
            response = httpx.get(url.rstrip("/") + "/health", timeout=5.0, headers=headers)
        except httpx.HTTPError as exc:
            raise pytest.UsageError(
                f"pytest-osmosis: --osmosis-server {shown}: no rollout server there "
                f"({type(exc).__name__}: {redact_url(str(exc))}). "
                "Start it (osmosis-rollout serve ...) or use --osmosis-serve."
            ) from None
        if response.status_code != 200:
            unauthorized = response.status_code == 401
            hint = f" (set {SERVER_API_KEY_ENV} to its inbound key)" if unauthorized else ""
            raise pytest.UsageError(
                f"pytest-osmosis: --osmosis-server {shown}: GET /health answered "
                f"{response.status_code}{hint}"
            )


def make_clients(scheduler: RolloutScheduler, urls: list[str]) -> list[Any]:
    """Enough ``RolloutClient``s for the scheduler's concurrency, made on its loop, interleaved
    so that round-robin spreads rows over the servers first."""
    from osmosis_rollout.controller import RolloutClient

    async def make(url: str) -> Any:
        return RolloutClient(
            url, admission_timeout_sec=120.0, api_key=os.environ.get(SERVER_API_KEY_ENV) or None
        )

    per_url = max(1, -(-scheduler.concurrency // (ROLLOUTS_PER_CLIENT * len(urls))))
    return [
        scheduler.run(functools.partial(make, url), timeout=10)
        for _ in range(per_url)
        for url in urls
    ]


def close_clients(scheduler: RolloutScheduler, clients: list[Any]) -> None:
    """Close clients on the loop they were made on (best effort; the loop may be gone)."""
    for client in clients:
        with contextlib.suppress(Exception):
            scheduler.run(client.aclose, timeout=5)


class ServedServer:
    """The ``--osmosis-serve`` subprocess: its URL, how to stop it, and why it died (rows
    admitted to it wait on :meth:`exited` beside their polls, so its death fails them at once)."""

    LAST_LINES = 15

    def __init__(self, process: subprocess.Popen[bytes], log_path: Path, log: IO[bytes]) -> None:
        self.url = ""  # known once the server named its port
        self.process = process
        self.log_path = log_path
        self._log = log
        self._exited: asyncio.Event | None = None
        self.stopping = False  # an exit after stop() is ours, not a death

    def stop(self) -> None:
        """Stop the server (its exit from now on is ours, not a death)."""
        self.stopping = True
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(SERVE_STOP_TIMEOUT_SEC)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self._log.close()

    def exit_cause(self) -> str | None:
        """``None`` while the server runs (or after we stopped it), else what ended it."""
        code = self.process.poll()
        if code is None or self.stopping:
            return None
        if code < 0:
            status = f"killed by {_SIGNAL_NAMES.get(-code, f'signal {-code}')}"
        else:
            status = f"exited with status {code}"
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()[-self.LAST_LINES :]
        except OSError as exc:
            lines = [f"(its log {self.log_path} is unreadable: {exc})"]
        tail = "\n".join(f"  {line}" for line in lines) or "  (nothing)"
        return (
            f"the --osmosis-serve rollout server {status}; the remaining rows fail without "
            f"it. Last lines of {self.log_path}:\n{tail}"
        )

    async def exited(self) -> None:
        """Return once the process has exited (one watching thread, made on first call)."""
        if self.process.poll() is not None:
            return
        if self._exited is None:
            loop = asyncio.get_running_loop()
            event = self._exited = asyncio.Event()

            def watch() -> None:
                self.process.wait()
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                    loop.call_soon_threadsafe(event.set)

            threading.Thread(target=watch, name="osmosis-serve-watch", daemon=True).start()
        await self._exited.wait()


def start_server_subprocess(
    entrypoint: str, *, cwd: Path, output: Path, artifact_root: Path
) -> ServedServer:
    """Run ``osmosis-rollout serve <entrypoint>`` on a loopback port, until healthy; it writes
    trajectories under ``artifact_root`` and its log to ``<output>/server.log``. It binds port 0
    and names the port in its first line, so no other process can take it in between."""
    env = {**os.environ, ARTIFACT_ROOT_ENV: str(artifact_root), "PYTHONUNBUFFERED": "1"}
    log_path = output / "server.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = log_path.open("ab")
    start = log.tell()  # a reused output directory's log holds earlier servers' lines
    command = [sys.executable, "-m", "osmosis_rollout.cli", "serve", entrypoint]
    process = subprocess.Popen(
        [*command, "--host", "127.0.0.1", "--port", "0"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=str(cwd),
    )
    served = ServedServer(process, log_path, log)
    deadline = time.monotonic() + SERVE_START_TIMEOUT_SEC
    # One client for every poll: a client per poll loads the CA bundle each time, CPU taken
    # from the server importing the user's rollout on the same cores.
    with httpx.Client(timeout=1.0, headers=_auth_headers()) as health:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                served.stop()
                tail = log_path.read_text(errors="replace")[-2000:]
                raise pytest.UsageError(
                    f"pytest-osmosis: --osmosis-serve: the server exited early:\n{tail}"
                )
            if not served.url:
                with log_path.open("rb") as written:
                    written.seek(start)
                    found = _SERVING_ON.search(written.read())
                served.url = f"http://127.0.0.1:{int(found.group(1))}" if found else ""
            with contextlib.suppress(httpx.HTTPError):
                if served.url and health.get(served.url + "/health").status_code == 200:
                    return served
            time.sleep(0.1)
    served.stop()
    raise pytest.UsageError(
        f"pytest-osmosis: --osmosis-serve: no healthy server on {served.url or 'its port'} after "
        f"{SERVE_START_TIMEOUT_SEC:g}s (its log: {log_path})"
    )
