"""Ray actors redact what they print and log, as the server does: the environment's secrets,
each rollout's key, and the inbound key given to ``serve`` by ``--api-key`` alone."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from ray_support import RayCluster

from osmosis_rollout import ExecutionRequest, RolloutContext, RolloutStatus
from osmosis_rollout.backend.ray import RayBackend

pytestmark = pytest.mark.timeout(300)

INBOUND = "inbound-FLAG-SECRET-5e6f7a8b"
ROLLOUT_KEY = "rollout-key-SECRET-1a2b3c4d"


def _worker_logs(pid: int) -> list[Path]:
    """The log files Ray's workers write, for the worker process ``pid``."""
    root = Path(os.environ.get("RAY_TMPDIR") or "/tmp") / "ray"
    return [
        p for p in root.glob(f"session_*/logs/worker-*-{pid}.*") if p.suffix in {".out", ".err"}
    ]


async def test_an_actor_redacts_the_inbound_key_and_the_rollouts_key_from_its_output(
    ray_cluster: RayCluster, rollout_dir: Path
) -> None:
    backend = RayBackend(
        str(rollout_dir / "main.py"),
        address=ray_cluster.address,
        actors=1,
        secrets={"OSMOSIS_ROLLOUT_API_KEY": INBOUND},
    )
    backend.start()
    try:
        context = RolloutContext(
            chat_completions_url="http://127.0.0.1:9/v1", api_key=ROLLOUT_KEY, rollout_id="leak"
        )
        with context:
            outcome = await backend.execute(
                ExecutionRequest(
                    id="leak", prompt=[], grade=False, metadata={"mode": "leak", "secret": INBOUND}
                )
            )
    finally:
        backend.close()
    assert outcome.result.status is RolloutStatus.SUCCESS, outcome.result
    assert outcome.result.sample is not None
    pid = json.loads(outcome.result.sample.messages[-1]["content"])["pid"]
    deadline = time.monotonic() + 30  # the actor's output reaches its files asynchronously
    while True:
        output = "".join(p.read_text(errors="replace") for p in _worker_logs(pid))
        if "leak: logged" in output or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert "leak: printed [REDACTED:OSMOSIS_ROLLOUT_API_KEY] [REDACTED:POLICY_API_KEY]" in output, (
        output[-3000:]
    )
    assert "leak: in pieces [REDACTED:POLICY_API_KEY]" in output
    assert "leak: logged [REDACTED:OSMOSIS_ROLLOUT_API_KEY]" in output
    assert INBOUND not in output and ROLLOUT_KEY not in output
