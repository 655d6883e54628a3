"""A real ``osmosis-rollout serve`` subprocess for the reliability suite (imported as
``serve_support``): a workflow file, start, wait until healthy, always stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from _support.net import wait_until_healthy
from reliability_support import free_port

SERVED_MAIN = """
import asyncio
from osmosis_rollout import AgentWorkflow, Grader

class Sleepy(AgentWorkflow):
    async def run(self, ctx):
        await asyncio.sleep(float((ctx.metadata or {}).get("sleep", 0)))
        return [{"role": "assistant", "content": "done"}]

class Judge(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""
"""A workflow that sleeps ``metadata['sleep']`` seconds, and a grader giving 1.0."""


def serve_command() -> list[str]:
    """``osmosis-rollout serve`` of the running interpreter's environment."""
    script = Path(sys.executable).parent / "osmosis-rollout"
    if script.exists():
        return [str(script), "serve"]
    return [sys.executable, "-m", "osmosis_rollout.cli", "serve"]


def write_main(directory: Path) -> Path:
    """Write :data:`SERVED_MAIN` as ``directory/main.py``; return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "main.py"
    path.write_text(textwrap.dedent(SERVED_MAIN))
    return path


@contextmanager
def served(
    main_py: Path,
    artifact_root: Path,
    *options: str,
    log: Path | None = None,
    preexec_fn: Callable[[], None] | None = None,
    health_headers: dict[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``osmosis-rollout serve main_py *options`` until healthy; yield ``(url, process)``.

    Output goes to ``log`` (default ``artifact_root/../serve.log``). ``preexec_fn`` runs in
    the child before it starts (e.g. to lower its limits); ``health_headers`` go with the
    health probes (the key of a server started with ``--api-key``). The process is killed
    on exit if it is still running.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log_path = log or artifact_root.parent / "serve.log"
    environment = {
        **os.environ,
        "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(artifact_root),
        "PYTHONUNBUFFERED": "1",
    }
    with open(log_path, "wb") as output:
        process = subprocess.Popen(
            [*serve_command(), str(main_py), "--port", str(port), *options],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=main_py.parent,
            preexec_fn=preexec_fn,
        )
        try:
            wait_healthy(url, process, log_path, headers=health_headers)
            yield url, process
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)


def wait_healthy(
    url: str,
    process: subprocess.Popen[bytes],
    log_path: Path,
    headers: dict[str, str] | None = None,
) -> None:
    """Poll ``/health`` until 200, or 401 from a server with a key (60 s bound: the machine
    may be saturated)."""
    wait_until_healthy(
        url,
        process=process,
        headers=headers,
        accept=(200, 401),
        timeout=60,
        describe=log_path.read_text,
    )
