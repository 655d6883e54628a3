"""``osmosis-rollout serve main.py --backend ray``: the wire here, the rollouts on a Ray cluster.

One cluster and one server (2 actors, 10 rollouts each) per module, driven over loopback
HTTP by our RolloutClient and by the official one (osmosis-ai 0.3.8 in its own venv). The
actor-kill test waits until the pool is whole again, so the tests do not depend on order.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ray_support import GatedPolicy, RayCluster, SwitchablePolicy, free_port, question

from osmosis_rollout.controller import PolicyServer, RolloutClient

sys.path.insert(0, str(Path(__file__).parents[1] / "interop"))

from interop_support import (
    OfficialSdkUnavailable,
    ServerProcess,
    ensure_official_venv,
    run_official_client,
    start_server,
)

pytestmark = pytest.mark.timeout(600)

RESULT_WAIT_SEC = 0.5


@pytest.fixture(scope="module")
def policy() -> SwitchablePolicy:
    return SwitchablePolicy()


@pytest.fixture(scope="module")
def policy_server(policy: SwitchablePolicy) -> Iterator[PolicyServer]:
    with PolicyServer(policy) as server:
        yield server


@pytest.fixture(scope="module")
def ray_server(
    ray_cluster: RayCluster, rollout_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    workdir = tmp_path_factory.mktemp("serve-ray")
    shutil.copytree(rollout_dir, workdir / "rollout")
    port = free_port()
    env = dict(os.environ, _OSMOSIS_ROLLOUT_PORT=str(port), PYTHONUNBUFFERED="1")
    env.pop("OSMOSIS_ROLLOUT_API_KEY", None)
    env["_OSMOSIS_ROLLOUT_ARTIFACT_ROOT"] = str(workdir / "artifacts")
    command = [
        sys.executable,
        "-m",
        "osmosis_rollout.cli",
        "serve",
        "rollout/main.py",
        "--backend",
        "ray",
        "--ray-address",
        ray_cluster.address,
        "--ray-actors",
        "2",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--result-wait-timeout-sec",
        str(RESULT_WAIT_SEC),
        "--polling-lease-timeout-sec",
        "30",
    ]
    server = start_server("ours-on-ray", command, cwd=workdir, env=env)
    try:
        yield server
    finally:
        server.stop()


def _health(server: ServerProcess) -> dict[str, Any]:
    health: dict[str, Any] = httpx.get(server.url + "/health", timeout=10).json()
    return health


async def _run_all(
    server: ServerProcess, policy_server: PolicyServer, prefix: str, count: int
) -> dict[str, Any]:
    client = RolloutClient(server.url, admission_timeout_sec=60)
    try:
        handles = []
        for i in range(count):
            prompt, label = question(i)
            rollout_id = f"{prefix}{i}"
            handles.append(
                await client.run_rollout_async(
                    initial_messages=prompt,
                    chat_completions_url=policy_server.rollout_url(rollout_id),
                    rollout_id=rollout_id,
                    llm_api_key=policy_server.api_key,
                    label=label,
                )
            )
        results = await asyncio.gather(*handles)
    finally:
        await client.aclose()
    return {r.rollout_id: r.model_dump(mode="json") for r in results}


def test_our_client_runs_200_rollouts_on_the_cluster_with_correct_rewards(
    ray_server: ServerProcess, policy_server: PolicyServer
) -> None:
    results = asyncio.run(_run_all(ray_server, policy_server, "ours-", 200))

    assert len(results) == 200
    for i in range(200):
        result = results[f"ours-{i}"]
        _, label = question(i)
        assert result["status"] == "success", result
        assert result["sample"]["reward"] == 1.0
        assert result["sample"]["messages"][-1]["content"] == f"The answer is {label}"
    pool = _health(ray_server)["ray"]["actors"]
    assert len(pool) == 2 and all(actor["max_concurrent"] == 10 for actor in pool)


def test_the_official_client_runs_200_rollouts_on_the_cluster(
    ray_server: ServerProcess, policy_server: PolicyServer
) -> None:
    try:
        official_python = ensure_official_venv()
    except OfficialSdkUnavailable as exc:
        pytest.skip(f"official osmosis-ai unavailable: {exc}")
    rollouts = []
    for i in range(200):
        prompt, label = question(i)
        rollout_id = f"official-{i}"
        rollouts.append(
            {
                "rollout_id": rollout_id,
                "initial_messages": prompt,
                "chat_completions_url": policy_server.rollout_url(rollout_id),
                "llm_api_key": policy_server.api_key,
                "label": label,
            }
        )
    report = run_official_client(
        official_python, {"url": ray_server.url, "rollouts": rollouts}, timeout_sec=300
    )

    assert report["admitted"] == {r["rollout_id"]: "queued" for r in rollouts}
    for i in range(200):
        result = report["results"][f"official-{i}"]
        assert result["status"] == "success", result
        assert result["sample"]["reward"] == 1.0
    assert [a["alive"] for a in report["health"]["ray"]["actors"]] == [True, True]


def test_killing_an_actor_with_20_rollouts_in_flight_ends_each_with_one_named_result(
    ray_server: ServerProcess, policy: SwitchablePolicy, policy_server: PolicyServer
) -> None:
    gate = GatedPolicy()
    policy.gate = gate

    async def scenario() -> dict[str, Any]:
        running = asyncio.create_task(_run_all(ray_server, policy_server, "kill-", 20))
        try:
            await asyncio.to_thread(gate.wait_for, 20)
            actors = _health(ray_server)["ray"]["actors"]
            assert [a["in_flight"] for a in actors] == [10, 10]
            os.kill(actors[0]["pid"], signal.SIGKILL)
        finally:
            gate.release()
        return await running

    try:
        results = asyncio.run(scenario())
    finally:
        policy.gate = None

    assert sorted(results) == sorted(f"kill-{i}" for i in range(20))
    by_status: dict[str, list[dict[str, Any]]] = {}
    for result in results.values():
        by_status.setdefault(result["status"], []).append(result)
    assert sorted(by_status) == ["failure", "success"]
    assert len(by_status["failure"]) == 10 and len(by_status["success"]) == 10
    for lost in by_status["failure"]:
        assert lost["err_category"] == "internal_error"
        assert lost["err_message"].startswith("worker_lost: the Ray actor running this rollout")
        assert lost["sample"] is None
    for done in by_status["success"]:
        assert done["sample"]["reward"] == 1.0 and done["err_category"] is None

    for _ in range(300):
        health = _health(ray_server)
        if health["ray"]["actors_replaced"] == 1 and len(health["ray"]["actors"]) == 2:
            break
        time.sleep(0.1)
    assert health["ray"]["rollouts_lost"] >= 10
    assert health["lifecycle"]["active_rollouts"] == 0
    again = asyncio.run(_run_all(ray_server, policy_server, "after-", 4))
    assert all(r["status"] == "success" for r in again.values())
