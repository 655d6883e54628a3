"""Helpers for the Ray tests: a loopback cluster process, policies, and a gate for in-flight work."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _support.net import free_port as free_port

CLUSTER_START_TIMEOUT_SEC = 60
CLUSTER_STOP_TIMEOUT_SEC = 30


@dataclass
class RayCluster:
    """A ``ray start --head --block`` process; ``stop()`` ends it and everything it started."""

    address: str
    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(CLUSTER_STOP_TIMEOUT_SEC)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)


def start_ray_cluster(workdir: Path) -> RayCluster:
    """Start a 2-CPU head without dashboard on a free loopback port; wait for its GCS."""
    port = free_port()
    ray_cli = Path(sys.executable).parent / "ray"
    log = workdir / "ray-head.log"
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                str(ray_cli),
                "start",
                "--head",
                "--block",
                "--num-cpus=2",
                "--include-dashboard=false",
                "--disable-usage-stats",
                "--node-ip-address=127.0.0.1",
                f"--port={port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group, so a hung stop can kill all of it
        )
    cluster = RayCluster(f"127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + CLUSTER_START_TIMEOUT_SEC
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"ray start exited with {process.returncode}:\n{cluster.log_tail()}")
        if "Ray runtime started" in log.read_text(errors="replace"):
            return cluster
        time.sleep(0.2)
    cluster.stop()
    raise RuntimeError(f"ray start did not finish in {CLUSTER_START_TIMEOUT_SEC}s")


def multiply_policy(request: Any) -> str:
    """Multiplies the first two numbers of the last user message."""
    text = str(request.messages[-1].get("content") or "")
    numbers = [int(n) for n in re.findall(r"-?\d+", text)]
    if len(numbers) >= 2:
        return f"The answer is {numbers[0] * numbers[1]}"
    return "ok"


@dataclass
class GatedPolicy:
    """A multiplying policy that holds every call until ``release()``; counts arrivals."""

    arrived: int = 0
    _open: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    async def __call__(self, request: Any) -> str:
        with self._lock:
            self.arrived += 1
        while not self._open.is_set():
            await asyncio.sleep(0.02)
        return multiply_policy(request)

    def release(self) -> None:
        self._open.set()

    def wait_for(self, count: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.arrived < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self.arrived} of {count} calls reached the policy")
            time.sleep(0.02)


class SwitchablePolicy:
    """Multiplies; while a gate is installed, calls wait on it (for in-flight tests)."""

    def __init__(self) -> None:
        self.gate: GatedPolicy | None = None

    async def __call__(self, request: Any) -> str:
        if self.gate is not None:
            return await self.gate(request)
        return multiply_policy(request)


def question(i: int) -> tuple[list[dict[str, Any]], str]:
    """Row ``i``: a multiplication prompt and its label."""
    a, b = i % 17 + 2, i % 13 + 3
    return [{"role": "user", "content": f"What is {a} times {b}?"}], str(a * b)
