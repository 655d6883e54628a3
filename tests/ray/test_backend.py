"""RayBackend against a real local Ray cluster, driven in this process like the server drives it.

One cluster and one pool (2 actors x 4 slots) serve the whole module; the policy is our
PolicyServer on loopback, so actors make real HTTP model calls back to this process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray_support import GatedPolicy, RayCluster, SwitchablePolicy, question

from osmosis_rollout import ExecutionRequest, LocalBackend, RolloutContext, RolloutStatus
from osmosis_rollout.backend.ray import WORKER_LOST, RayBackend
from osmosis_rollout.context import RolloutProgress
from osmosis_rollout.controller import PolicyServer
from osmosis_rollout.errors import EntrypointError
from osmosis_rollout.types import ExecutionOutcome, RolloutErrorCategory

#: One event loop for the module, as a server has one for its life: a dead actor's replacement
#: is a task on the loop that saw it die, and it must outlive the test that killed the actor
#: (with a loop per test, a test failing before it waits for the pool would cancel it).
pytestmark = [pytest.mark.timeout(300), pytest.mark.asyncio(loop_scope="module")]


@pytest.fixture(scope="module")
def policy() -> SwitchablePolicy:
    return SwitchablePolicy()


@pytest.fixture(scope="module")
def policy_server(policy: SwitchablePolicy) -> Iterator[PolicyServer]:
    with PolicyServer(policy) as server:
        yield server


@pytest.fixture(scope="module")
def backend(ray_cluster: RayCluster, rollout_dir: Path) -> Iterator[RayBackend]:
    pool = RayBackend(
        str(rollout_dir / "main.py"), address=ray_cluster.address, actors=2, max_concurrent=4
    )
    pool.start()
    try:
        yield pool
    finally:
        pool.close()


async def run(
    backend: Any,
    server: PolicyServer,
    rollout_id: str,
    *,
    progress: RolloutProgress | None = None,
    **fields: Any,
) -> ExecutionOutcome:
    """Execute one request the way the server does: inside the rollout's context."""
    ctx = RolloutContext(
        chat_completions_url=server.rollout_url(rollout_id),
        api_key=server.api_key,
        rollout_id=rollout_id,
        progress=progress,
    )
    with ctx:
        outcome: ExecutionOutcome = await backend.execute(ExecutionRequest(id=rollout_id, **fields))
    return outcome


def row(i: int, **metadata: Any) -> dict[str, Any]:
    prompt, label = question(i)
    return {"prompt": prompt, "label": label, "metadata": metadata or None}


async def test_rollouts_on_the_cluster_give_what_local_backend_gives(
    backend: RayBackend, policy_server: PolicyServer, rollout_dir: Path
) -> None:
    local = LocalBackend(
        workflow=f"{_entry_module(rollout_dir)}:RayTestWorkflow",
        grader=f"{_entry_module(rollout_dir)}:RayTestGrader",
    )
    ids = range(16)
    remote = await asyncio.gather(*(run(backend, policy_server, f"r{i}", **row(i)) for i in ids))
    here = await asyncio.gather(*(run(local, policy_server, f"l{i}", **row(i)) for i in ids))

    for ours, theirs in zip(remote, here, strict=True):
        assert ours.result.status is RolloutStatus.SUCCESS, ours.result
        assert ours.result.model_dump(exclude={"extra_fields"}) == theirs.result.model_dump(
            exclude={"extra_fields"}
        )
        assert ours.result.sample is not None and ours.result.sample.reward == 1.0
    assert ours.result_to_save.sample is not None
    assert ours.result_to_save.sample.trajectory_messages == ours.result.sample.messages


async def test_work_is_spread_over_every_actor_running_the_shipped_copy(
    backend: RayBackend, policy_server: PolicyServer, rollout_dir: Path
) -> None:
    outcomes = await asyncio.gather(
        *(
            run(
                backend,
                policy_server,
                f"pid{i}",
                prompt=[],
                metadata={"mode": "where"},
                grade=False,
            )
            for i in range(8)
        )
    )
    answers = [
        json.loads(o.result.sample.messages[-1]["content"]) for o in outcomes if o.result.sample
    ]
    pids = {answer["pid"] for answer in answers}
    assert pids == {actor["pid"] for actor in backend.health()["ray"]["actors"]}
    assert os.getpid() not in pids
    for answer in answers:
        shipped = Path(answer["cwd"])
        assert shipped != rollout_dir and (shipped / "helpers.py").is_file()


async def test_failures_keep_their_categories_and_messages(
    backend: RayBackend, policy_server: PolicyServer
) -> None:
    failed = await run(backend, policy_server, "fail", **row(1, mode="fail"))
    timed_out = await run(
        backend, policy_server, "slow", agent_timeout_sec=0.3, **row(1, mode="sleep", seconds=20)
    )

    assert (failed.result.status, failed.result.err_category, failed.result.err_message) == (
        RolloutStatus.FAILURE,
        RolloutErrorCategory.AGENT_ERROR,
        "workflow failed on purpose",
    )
    assert timed_out.result.err_category is RolloutErrorCategory.TIMEOUT
    assert timed_out.result.err_message == "workflow exceeded its 0.3s deadline"


async def test_time_queued_for_an_actor_counts_against_the_agent_deadline(
    backend: RayBackend, policy_server: PolicyServer
) -> None:
    fillers = [
        asyncio.create_task(
            run(backend, policy_server, f"fill{i}", grade=False, **row(i, mode="sleep", seconds=2))
        )
        for i in range(8)
    ]
    while backend.health()["concurrency"]["running"] < 8:
        await asyncio.sleep(0.02)
    late = await run(backend, policy_server, "late", agent_timeout_sec=0.5, **row(3))
    await asyncio.gather(*fillers)

    assert late.result.err_category is RolloutErrorCategory.TIMEOUT
    assert late.result.err_message is not None
    assert late.result.err_message.startswith("workflow exceeded its 0.5s deadline (")
    assert late.result.err_message.endswith("s of it spent queued)")


async def test_grading_status_reaches_the_callers_context(
    backend: RayBackend, policy_server: PolicyServer
) -> None:
    seen: list[RolloutStatus] = []
    progress = RolloutProgress(status=RolloutStatus.RUNNING, on_status=seen.append)
    outcome = await run(
        backend, policy_server, "grading", progress=progress, **row(2, slow_grade=0.2)
    )

    assert outcome.result.status is RolloutStatus.SUCCESS
    assert seen == [RolloutStatus.GRADING]


@pytest.mark.parametrize("after", [0.0, 0.3], ids=["at-dispatch", "while-running"])
async def test_cancelling_the_caller_cancels_the_rollout_in_its_actor(
    backend: RayBackend, policy_server: PolicyServer, after: float
) -> None:
    task = asyncio.create_task(
        run(backend, policy_server, f"cancel-{after}", **row(1, mode="sleep"))
    )
    while backend.health()["concurrency"]["running"] < 1:
        await asyncio.sleep(0.005)
    await asyncio.sleep(after)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert backend.health()["concurrency"]["running"] == 0


async def test_a_workflow_that_swallows_cancellation_still_reports_its_result(
    backend: RayBackend, policy_server: PolicyServer
) -> None:
    task = asyncio.create_task(
        run(backend, policy_server, "swallow", grade=False, **row(1, mode="swallow"))
    )
    while backend.health()["concurrency"]["running"] < 1:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.5)
    task.cancel()
    outcome = await task

    assert outcome.result.status is RolloutStatus.SUCCESS
    assert outcome.result.sample is not None
    assert outcome.result.sample.messages[-1]["content"] == "finished anyway"


async def _kill_one_actor_mid_flight(
    backend: RayBackend, policy: SwitchablePolicy, server: PolicyServer, prefix: str
) -> tuple[list[ExecutionOutcome], int]:
    """8 rollouts held in the policy across both actors; SIGKILL one actor; release."""
    gate = GatedPolicy()
    policy.gate = gate
    try:
        tasks = [
            asyncio.create_task(run(backend, server, f"{prefix}{i}", **row(i))) for i in range(8)
        ]
        await asyncio.to_thread(gate.wait_for, 8)
        victim = backend.health()["ray"]["actors"][0]
        assert victim["in_flight"] == 4
        os.kill(victim["pid"], signal.SIGKILL)
        gate.release()
        outcomes = await asyncio.gather(*tasks)
    finally:
        gate.release()
        policy.gate = None
    return outcomes, victim["pid"]


async def _wait_for_full_pool(backend: RayBackend) -> None:
    for _ in range(600):
        actors = backend.health()["ray"]["actors"]
        if len(actors) == 2 and all(a["alive"] for a in actors):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the pool did not recover: {backend.health()}")


async def test_a_killed_actor_fails_its_rollouts_as_worker_lost_and_is_replaced(
    backend: RayBackend, policy: SwitchablePolicy, policy_server: PolicyServer
) -> None:
    replaced, redispatched = backend.actors_replaced, backend.rollouts_redispatched
    outcomes, victim = await _kill_one_actor_mid_flight(backend, policy, policy_server, "k")

    lost = [o.result for o in outcomes if o.result.status is RolloutStatus.FAILURE]
    won = [o.result for o in outcomes if o.result.status is RolloutStatus.SUCCESS]
    # The victim held 4. Each is lost, unless its "started" had not reached the caller when
    # the actor died (a window under load): then it ran again elsewhere, and is counted.
    again = backend.rollouts_redispatched - redispatched
    assert len(lost) + again == 4 and len(won) == 8 - len(lost)
    assert backend.health()["ray"]["rollouts_redispatched"] == backend.rollouts_redispatched
    for result in lost:
        assert result.err_category is RolloutErrorCategory.INTERNAL_ERROR
        assert result.err_message is not None
        assert result.err_message.startswith(
            f"{WORKER_LOST}: the Ray actor running this rollout (pid {victim} "
        )
        assert result.extra_fields is not None and result.extra_fields["cause"] == WORKER_LOST
    assert all(r.sample is not None and r.sample.reward == 1.0 for r in won)

    await _wait_for_full_pool(backend)
    assert backend.actors_replaced == replaced + 1
    assert victim not in {a["pid"] for a in backend.health()["ray"]["actors"]}
    after = await run(backend, policy_server, "after-kill", **row(5))
    assert after.result.status is RolloutStatus.SUCCESS


async def test_with_retry_lost_a_killed_actors_rollouts_rerun_once_elsewhere(
    backend: RayBackend, policy: SwitchablePolicy, policy_server: PolicyServer
) -> None:
    await _wait_for_full_pool(backend)
    retried, redispatched = backend.rollouts_retried, backend.rollouts_redispatched
    backend.retry_lost = True
    try:
        outcomes, _ = await _kill_one_actor_mid_flight(backend, policy, policy_server, "rk")
    finally:
        backend.retry_lost = False

    assert [o.result.status for o in outcomes] == [RolloutStatus.SUCCESS] * 8
    assert all(o.result.sample is not None and o.result.sample.reward == 1.0 for o in outcomes)
    again = backend.rollouts_redispatched - redispatched  # not seen started: see above
    assert backend.rollouts_retried - retried + again == 4
    await _wait_for_full_pool(backend)


def _entry_module(rollout_dir: Path) -> str:
    """Import the shipped entrypoint here too, for the LocalBackend comparison."""
    import sys

    if str(rollout_dir) not in sys.path:
        sys.path.insert(0, str(rollout_dir))
    return "main"


async def test_an_entrypoint_that_cannot_import_on_the_actor_names_the_error(
    backend: RayBackend, ray_cluster: RayCluster, tmp_path: Path
) -> None:
    (tmp_path / "main.py").write_text("raise RuntimeError('cannot import on purpose')\n")
    broken = RayBackend(
        str(tmp_path / "main.py"), address=ray_cluster.address, actors=1, num_cpus=0
    )
    with pytest.raises(EntrypointError, match="cannot import on purpose"):
        broken.start()
    assert backend.health()["status"] == "ok"  # the shared connection survived


async def test_max_queue_depth_turns_capacity_off_once_that_many_wait_for_an_actor(
    backend: RayBackend, policy: SwitchablePolicy, policy_server: PolicyServer
) -> None:
    gate = GatedPolicy()
    policy.gate = gate
    backend.max_queue_depth = 1
    try:
        busy = [
            asyncio.create_task(run(backend, policy_server, f"q{i}", **row(i))) for i in range(8)
        ]
        await asyncio.to_thread(gate.wait_for, 8)
        assert backend.has_capacity()
        waiting = asyncio.create_task(run(backend, policy_server, "q-wait", **row(9)))
        while backend.health()["concurrency"]["queued"] < 1:
            await asyncio.sleep(0.02)
        assert not backend.has_capacity()
        assert backend.health()["max_queue_depth"] == 1
        gate.release()
        outcomes = await asyncio.gather(*busy, waiting)
    finally:
        gate.release()
        policy.gate = None
        backend.max_queue_depth = None
    assert all(o.result.status is RolloutStatus.SUCCESS for o in outcomes)
    assert backend.has_capacity()
