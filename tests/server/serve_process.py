"""A real ``osmosis-rollout serve`` subprocess on loopback (imported as ``serve_process``):
a workflow file, start, wait until healthy, always stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from _support.net import free_port, wait_until_healthy

SLEEPY_MAIN = """
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


def write_main(directory: Path, source: str = SLEEPY_MAIN) -> Path:
    """Write ``source`` as ``directory/main.py``; return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "main.py"
    path.write_text(textwrap.dedent(source))
    return path


def serve_command() -> list[str]:
    """``osmosis-rollout serve`` of the running interpreter's environment."""
    script = Path(sys.executable).parent / "osmosis-rollout"
    if script.exists():
        return [str(script), "serve"]
    return [sys.executable, "-m", "osmosis_rollout.cli", "serve"]


@contextmanager
def served(
    main_py: Path,
    log: Path,
    *options: str,
    env: Mapping[str, str] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    health_headers: Mapping[str, str] | None = None,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Run ``osmosis-rollout serve main_py *options`` until healthy; yield ``(url, process)``.

    Its output (stdout and stderr) goes to ``log``; trajectories go beside it. The process
    is killed on leaving the block if it is still running.
    """
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    environment = {
        **os.environ,
        "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(log.parent / "artifacts"),
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [*serve_command(), str(main_py), "--port", str(port), *options],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
            cwd=main_py.parent,
            preexec_fn=preexec_fn,
        )
        try:
            wait_until_healthy(
                url,
                process=process,
                headers=health_headers,
                accept=(200, 401),
                describe=log.read_text,
            )
            yield url, process
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(timeout=30)
