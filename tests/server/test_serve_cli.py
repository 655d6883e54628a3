"""``osmosis-rollout serve`` as a real subprocess: rollouts over loopback, SIGTERM drains."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _support.net import wait_until_healthy
from server_support import free_port, init_body, serving

from osmosis_rollout.cli import serve
from osmosis_rollout.controller import RolloutClient

MAIN = """
import asyncio
from osmosis_rollout import AgentWorkflow, Grader

class Sleepy(AgentWorkflow):
    async def run(self, ctx):
        await asyncio.sleep((ctx.metadata or {}).get("sleep", 0))
        return [{"role": "assistant", "content": "done"}]

class Judge(Grader):
    async def grade(self, ctx):
        ctx.set_reward(1.0)
"""


def serve_command() -> list[str]:
    script = Path(sys.executable).parent / "osmosis-rollout"
    if script.exists():
        return [str(script), "serve"]
    return [sys.executable, "-m", "osmosis_rollout.cli", "serve"]


@pytest.fixture
def main_py(tmp_path: Path) -> Path:
    path = tmp_path / "rollouts" / "demo" / "main.py"
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(MAIN))
    return path


def start_server(
    main_py: Path, port: int, artifact_root: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    environment = {
        **os.environ,
        "_OSMOSIS_ROLLOUT_ARTIFACT_ROOT": str(artifact_root),
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    return subprocess.Popen(
        [*serve_command(), str(main_py), "--port", str(port), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
        cwd=main_py.parent,
    )


def wait_healthy(
    url: str, process: subprocess.Popen[str], headers: dict[str, str] | None = None
) -> None:
    def output() -> str:  # only once it exited: reading a live process's pipe would block
        exited = process.poll() is not None and process.stdout is not None
        return process.stdout.read() if exited and process.stdout else ""

    wait_until_healthy(url, process=process, headers=headers, describe=output)


@pytest.fixture
def stop_later() -> Iterator[list[subprocess.Popen[str]]]:
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


async def test_serve_runs_rollouts_and_drains_in_flight_ones_on_sigterm(
    main_py: Path, tmp_path: Path, stop_later: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    artifacts = tmp_path / "artifacts"
    process = start_server(
        main_py,
        port,
        artifacts,
        "--result-wait-timeout-sec",
        "0.5",
        "--polling-lease-timeout-sec",
        "10",
    )
    stop_later.append(process)
    await asyncio.to_thread(wait_healthy, url, process)

    async with RolloutClient(url) as client:
        quick = await client.run_rollout(
            initial_messages=[{"role": "user", "content": "hi"}],
            chat_completions_url="http://127.0.0.1:9/v1",
            rollout_id="quick",
            label="x",
        )
        assert quick.status == "success"
        assert quick.sample is not None and quick.sample.reward == 1.0

        # In flight when SIGTERM arrives: they must finish during the drain.
        handles = [
            await client.run_rollout_async(
                initial_messages=[{"role": "user", "content": "hi"}],
                chat_completions_url="http://127.0.0.1:9/v1",
                rollout_id=f"slow-{i}",
                label="x",
                metadata={"sleep": 1.5},
            )
            for i in range(3)
        ]
        await asyncio.sleep(0.3)
        process.send_signal(signal.SIGTERM)
        outcomes = await asyncio.gather(*handles, return_exceptions=True)

    returncode = await asyncio.to_thread(process.wait, 60)
    output = process.stdout.read() if process.stdout else ""
    assert returncode == 0, output
    assert "osmosis-rollout serve: stopped" in output
    # Each in-flight rollout either reached its poller or finished during the drain:
    # a finished rollout leaves its trajectory behind.
    for i, outcome in enumerate(outcomes):
        if not isinstance(outcome, BaseException):
            assert outcome.status in {"success", "cancelled"}
        assert (artifacts / f"slow-{i}" / "trajectory.json").is_file(), output
    assert (artifacts / "quick" / "trajectory.json").is_file()


async def test_serve_enforces_the_api_key_from_the_environment(
    main_py: Path, tmp_path: Path, stop_later: list[subprocess.Popen[str]]
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = start_server(main_py, port, tmp_path / "a", env={"OSMOSIS_ROLLOUT_API_KEY": "k1"})
    stop_later.append(process)
    await asyncio.to_thread(wait_healthy, url, process, {"Authorization": "Bearer k1"})
    async with httpx.AsyncClient(base_url=url, timeout=5) as http:
        denied = await http.post("/rollout", json=init_body("r-1"))
        allowed = await http.get("/health", headers={"Authorization": "Bearer k1"})
    process.send_signal(signal.SIGINT)
    returncode = await asyncio.to_thread(process.wait, 30)
    assert denied.status_code == 401
    assert allowed.json()["lifecycle"]["accepting_rollouts"] is True
    assert returncode == 0


EXAMPLE_MAINS = sorted(
    (Path(__file__).parents[2] / "example_rollouts").glob("*/rollouts/*/main.py")
)


def serve_args(entrypoint: Path, *flags: str) -> argparse.Namespace:
    """``osmosis-rollout serve ENTRYPOINT FLAGS`` parsed by the real parser."""
    parser = argparse.ArgumentParser()
    serve.add_parser(parser.add_subparsers())
    return parser.parse_args(["serve", str(entrypoint), *flags])


@pytest.mark.parametrize("main_py", EXAMPLE_MAINS, ids=lambda p: p.parent.name)
async def test_server_flags_apply_to_the_app_every_example_builds(
    main_py: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(main_py.parent)
    args = serve_args(
        main_py,
        "--enable-metrics",
        "--max-queue-depth",
        "3",
        "--result-wait-timeout-sec",
        "0.5",
        "--max-body-bytes",
        "2048",
    )
    app, _ = serve.build_asgi_app(args)
    async with serving(app) as client:
        metrics = await client.get("/metrics")
        health = (await client.get("/health")).json()
        too_big = await client.post("/rollout", content=b"x" * 4096)
    assert metrics.status_code == 200, metrics.text
    assert "osmosis_rollout" in metrics.text
    assert health["max_queue_depth"] == 3
    assert app.state.osmosis_server.registry.result_wait_timeout_sec == 0.5
    assert too_big.status_code == 413


def test_server_flags_with_an_app_serve_did_not_build_name_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "main.py"
    path.write_text("from fastapi import FastAPI\napp = FastAPI()\n")
    completed = subprocess.run(
        [*serve_command(), str(path), "--enable-metrics", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "--enable-metrics" in completed.stderr
    assert "not built by create_rollout_server" in completed.stderr
    assert "defines its own app" not in completed.stderr


def test_an_unresolvable_entrypoint_exits_2_with_the_reason(tmp_path: Path) -> None:
    path = tmp_path / "main.py"
    path.write_text("x = 1\n")
    completed = subprocess.run(
        [*serve_command(), str(path), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert "found no FastAPI app, ExecutionBackend or AgentWorkflow subclass" in completed.stderr


def test_port_0_serves_on_the_port_the_system_chose_and_names_it_first(
    main_py: Path, tmp_path: Path, stop_later: list[subprocess.Popen[str]]
) -> None:
    process = start_server(main_py, 0, tmp_path / "artifacts")
    stop_later.append(process)
    assert process.stdout is not None
    first = process.stdout.readline()
    assert first.startswith("osmosis-rollout serve: ") and " on http://127.0.0.1:" in first, first
    port = int(first.rsplit(":", 1)[1])
    assert port != 0
    wait_healthy(f"http://127.0.0.1:{port}", process)
