"""The official ``RolloutClient`` (osmosis-ai 0.3.8, Python 3.12) drives OUR rollout server.

The client runs as ``scripts/official_client_driver.py`` in the official venv; our server is
``osmosis-rollout serve`` over the migrated official-style entrypoint; the model is our
``PolicyServer`` in this process. All traffic is real loopback HTTP.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from interop_support import ServerProcess, run_official_client

pytestmark = pytest.mark.timeout(900)  # the first run builds the official venv


def _rollout(policy_server: Any, rollout_id: str, prompt: str, **fields: Any) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "initial_messages": [{"role": "user", "content": prompt}],
        "chat_completions_url": policy_server.rollout_url(rollout_id),
        "llm_api_key": policy_server.api_key,
        **fields,
    }


def test_official_client_runs_rollouts_to_success_with_the_graders_reward(
    official_python: Path, ours_server: ServerProcess, policy_server: Any
) -> None:
    rollouts = [
        _rollout(
            policy_server,
            f"oc-ok-{i}",
            f"What is {i + 2} times {i + 3}?",
            label=str((i + 2) * (i + 3)),
        )
        for i in range(4)
    ]
    rollouts.append(_rollout(policy_server, "oc-wrong", "What is 6 times 7? wrong", label="42"))
    report = run_official_client(official_python, {"url": ours_server.url, "rollouts": rollouts})

    assert report["admitted"] == {r["rollout_id"]: "queued" for r in rollouts}
    for i in range(4):
        result = report["results"][f"oc-ok-{i}"]
        assert result["status"] == "success", result
        assert result["err_message"] is None and result["err_category"] is None
        assert result["sample"]["reward"] == 1.0
        assert result["sample"]["label"] == str((i + 2) * (i + 3))
        assert result["sample"]["messages"][-1] == {
            "role": "assistant",
            "content": f"The answer is {(i + 2) * (i + 3)}",
        }
    wrong = report["results"]["oc-wrong"]
    assert wrong["status"] == "success" and wrong["sample"]["reward"] == 0.0
    assert len(policy_server.log("oc-ok-0").calls) == 1


def test_official_client_sees_workflow_failures_with_their_categories(
    official_python: Path, ours_server: ServerProcess, policy_server: Any
) -> None:
    rollouts = [
        _rollout(policy_server, "oc-fail", "2 times 3", label="6", metadata={"mode": "fail"}),
        _rollout(policy_server, "oc-invalid", "2 times 3", label="6", metadata={"mode": "invalid"}),
        _rollout(
            policy_server,
            "oc-timeout",
            "2 times 3",
            label="6",
            metadata={"mode": "sleep", "seconds": 10},
            agent_timeout_sec=0.3,
        ),
        _rollout(
            policy_server, "oc-grader", "2 times 3", label="6", metadata={"mode": "grader_error"}
        ),
    ]
    report = run_official_client(official_python, {"url": ours_server.url, "rollouts": rollouts})
    results = report["results"]

    assert results["oc-fail"] == {
        "rollout_id": "oc-fail",
        "status": "failure",
        "sample": None,
        "err_message": "workflow failed on purpose",
        "err_category": "agent_error",
    }
    assert results["oc-invalid"]["err_category"] == "validation_error"
    assert results["oc-timeout"]["err_category"] == "timeout"
    assert results["oc-timeout"]["err_message"].startswith("workflow exceeded its 0.3s deadline")
    grader = results["oc-grader"]
    assert (grader["status"], grader["err_category"], grader["err_message"]) == (
        "failure",
        "agent_error",
        "'k'",
    )
    assert grader["sample"]["reward"] is None  # the failed grade's sample is kept, reward nulled


def test_official_client_cancels_a_running_rollout_on_our_server(
    official_python: Path, ours_server: ServerProcess, policy_server: Any
) -> None:
    rollout = _rollout(
        policy_server,
        "oc-cancel",
        "2 times 3",
        label="6",
        metadata={"mode": "sleep", "seconds": 20},
    )
    report = run_official_client(
        official_python,
        {"url": ours_server.url, "rollouts": [rollout], "cancel": ["oc-cancel"]},
    )

    assert report["reached_running"] == {"oc-cancel": "running"}
    assert report["cancel"]["oc-cancel"] == {"dispositions": {"oc-cancel": "cancelled_running"}}
    assert report["results"]["oc-cancel"] == {
        "rollout_id": "oc-cancel",
        "status": "cancelled",
        "sample": None,
        "err_message": "cancelled",
        "err_category": None,
    }
    assert report["idle"]["lifecycle"]["active_rollouts"] == 0


def test_official_client_accepts_our_health_for_wait_idle(
    official_python: Path, ours_server: ServerProcess, policy_server: Any
) -> None:
    rollout = _rollout(policy_server, "oc-idle", "4 times 5", label="20")
    report = run_official_client(official_python, {"url": ours_server.url, "rollouts": [rollout]})

    health = report["health"]
    assert health["status"] == "ok"
    assert isinstance(health["process_id"], str) and health["process_id"]
    assert isinstance(health["instance_id"], str) and health["instance_id"]
    assert health["lifecycle"]["accepting_rollouts"] is True
    idle = report["idle"]
    assert "error" not in idle, idle
    assert idle["process_id"] == health["process_id"]
    assert idle["lifecycle"] == {"accepting_rollouts": True, "active_rollouts": 0}
    assert set(idle["concurrency"]) == {"max_concurrent", "queued", "running"}
