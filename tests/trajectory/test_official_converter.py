"""The official SDK's trajectory entry points: ``convert_sample_to_trajectory`` and reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from osmosis_rollout.trajectory import (
    SampleReport,
    TrajectoryReport,
    convert_sample_to_trajectory,
    report_from_response,
    validate_atif,
)
from osmosis_rollout.types import RolloutSample

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "What is 6 times 7?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "multiply", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "42"},
    {"role": "assistant", "content": "42"},
]


def _sample() -> RolloutSample:
    return RolloutSample(id="s", messages=MESSAGES, trajectory_messages=MESSAGES, reward=1.0)


def _report(calls: int) -> SampleReport:
    return SampleReport.model_validate(
        {
            "model_name": "policy-v1",
            "llm_call_metrics": [
                {"prompt_tokens": 10 * (i + 1), "completion_tokens": 5, "model_name": f"m{i}"}
                for i in range(calls)
            ],
        }
    )


def test_per_call_metrics_land_on_the_agent_steps_in_order() -> None:
    doc = convert_sample_to_trajectory(
        _sample(), rollout_id="r1", request_label="42", report=_report(2)
    ).to_json_dict()
    validate_atif(doc)
    agent_steps = [step for step in doc["steps"] if step["source"] == "agent"]
    assert [step["metrics"]["prompt_tokens"] for step in agent_steps] == [10, 20]
    assert [step["model_name"] for step in agent_steps] == ["m0", "m1"]
    assert all(step["llm_call_count"] == 1 for step in agent_steps)
    assert doc["agent"]["model_name"] == "policy-v1"
    assert doc["final_metrics"]["total_prompt_tokens"] == 30
    assert doc["final_metrics"]["total_completion_tokens"] == 10
    assert doc["extra"]["osmosis"]["label"] == "42"
    assert doc["session_id"] == doc["trajectory_id"] == "r1"


def test_metrics_that_do_not_match_the_steps_are_kept_not_misattributed() -> None:
    doc = convert_sample_to_trajectory(
        _sample(),
        rollout_id="r1",
        report=_report(3),
        unmatched_sample_reports={"other": _report(1)},
    ).to_json_dict()
    osmosis = doc["extra"]["osmosis"]
    assert len(osmosis["unmatched_llm_call_metrics"]) == 3
    assert "other" in osmosis["unmatched_sample_reports"]
    assert all("llm_call_count" not in step for step in doc["steps"])


def test_a_default_model_name_is_used_without_a_report() -> None:
    trajectory = convert_sample_to_trajectory(_sample(), rollout_id="r", default_model_name="base")
    assert trajectory.agent.model_name == "base"


def test_the_official_pydantic_trajectory_is_returned_with_the_documents_content() -> None:
    from osmosis_rollout.trajectory import Trajectory, trajectory_document

    arguments: dict[str, Any] = {
        "rollout_id": "r1",
        "request_label": "42",
        "request_metadata": {"difficulty": "easy"},
        "report": _report(2),
        "default_model_name": "base",
    }
    trajectory = convert_sample_to_trajectory(_sample(), **arguments)
    assert isinstance(trajectory, Trajectory)
    from osmosis_rollout.trajectory import atif

    assert atif.Trajectory is Trajectory  # where the official module keeps its models
    assert trajectory.to_json_dict() == trajectory_document(_sample(), **arguments)
    assert [step.source for step in trajectory.steps] == ["user", "agent", "agent"]
    [call] = trajectory.steps[1].tool_calls or []
    assert (call.tool_call_id, call.function_name) == ("c1", "multiply")
    assert trajectory.final_metrics is not None and trajectory.final_metrics.total_steps == 3


def test_messages_that_make_no_step_are_a_validation_error_as_in_the_official() -> None:
    from pydantic import ValidationError

    sample = RolloutSample(id="s", messages=[], trajectory_messages=[])
    with pytest.raises(ValidationError, match="steps"):
        convert_sample_to_trajectory(sample, rollout_id="r")


def test_the_models_refuse_what_atif_refuses() -> None:
    from pydantic import ValidationError

    from osmosis_rollout.trajectory import Trajectory

    agent = {"name": "a", "version": "1"}
    good = {"agent": agent, "steps": [{"step_id": 1, "source": "user", "message": "hi"}]}
    assert Trajectory.model_validate(good).schema_version == "ATIF-v1.7"
    bad_steps = [
        {"step_id": 2, "source": "user", "message": "hi"},
        {"step_id": 1, "source": "user", "message": "hi", "model_name": "m"},
        {"step_id": 1, "source": "user", "message": "hi", "timestamp": "yesterday"},
        {"step_id": 1, "source": "user", "message": "hi", "unknown": 1},
        {
            "step_id": 1,
            "source": "agent",
            "message": "",
            "observation": {"results": [{"source_call_id": "nope", "content": "x"}]},
        },
        {"step_id": 1, "source": "agent", "message": "", "metrics": {"cost_usd": float("nan")}},
    ]
    for step in bad_steps:
        with pytest.raises(ValidationError):
            Trajectory.model_validate({"agent": agent, "steps": [step]})


def test_a_sample_without_trajectory_messages_cannot_be_converted() -> None:
    sample = RolloutSample(id="s", messages=MESSAGES, trajectory_messages=None)
    with pytest.raises(ValueError, match="trajectory_messages"):
        convert_sample_to_trajectory(sample, rollout_id="r")


def test_a_callback_acknowledgement_yields_its_report() -> None:
    body = {"trajectory": {"model_name": "m", "samples": {"s": {"llm_call_metrics": [{}]}}}}
    report = report_from_response(httpx.Response(200, json=body))
    assert isinstance(report, TrajectoryReport)
    assert report.model_name == "m"
    assert len(report.samples["s"].llm_call_metrics) == 1


@pytest.mark.parametrize(
    "response",
    [
        httpx.Response(200, text="not json"),
        httpx.Response(200, json=[1, 2]),
        httpx.Response(200, json={"ok": True}),
        httpx.Response(200, json={"trajectory": {"samples": "not a map"}}),
    ],
    ids=["not-json", "not-object", "no-trajectory", "malformed"],
)
def test_anything_else_yields_no_report(response: httpx.Response) -> None:
    assert report_from_response(response) is None


CLIENT_PATH_CHECK = """
from osmosis_rollout import controller, errors
from osmosis_rollout.client import (
    RolloutAdmissionTimeoutError,
    RolloutClient,
    RolloutHandle,
    RolloutProtocolError,
)
from osmosis_rollout.client.client import RolloutClient as Nested

assert RolloutClient is controller.RolloutClient is Nested
assert RolloutHandle is controller.RolloutHandle
assert RolloutProtocolError is errors.RolloutProtocolError
assert RolloutAdmissionTimeoutError is errors.RolloutAdmissionTimeoutError
print("ok")
"""


def test_the_client_path_gives_the_controller_client_and_the_protocol_errors() -> None:
    # A fresh interpreter, as a user's import sees it: in this process an in-process pytester
    # run (another test file on the same worker) drops the modules it imported first.
    done = subprocess.run(
        [sys.executable, "-c", CLIENT_PATH_CHECK],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def _result(sample: RolloutSample | None, **kwargs: Any) -> Any:
    from osmosis_rollout.types import ExecutionResult, RolloutStatus

    return ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample, **kwargs)


async def test_save_trajectory_takes_the_official_awaited_keyword_call(tmp_path: Path) -> None:
    from osmosis_rollout.trajectory import save_trajectory

    report = TrajectoryReport(model_name="policy-v1", samples={"any-key": _report(2)})
    returned = await save_trajectory(
        rollout_id="r1",
        result=_result(_sample(), extra_fields={"phase": "done"}),
        request_label="42",
        request_metadata={"difficulty": "easy"},
        request_extra_fields={"source": "test"},
        report=report,
        artifact_root=tmp_path,
        diagnostics={"phase": "graded"},
    )
    assert returned is None
    doc = json.loads((tmp_path / "r1" / "trajectory.json").read_text(encoding="utf-8"))
    validate_atif(doc)
    osmosis = doc["extra"]["osmosis"]
    assert (osmosis["label"], osmosis["request_metadata"]) == ("42", {"difficulty": "easy"})
    assert osmosis["request_extra_fields"] == {"source": "test"}
    assert doc["final_metrics"]["total_prompt_tokens"] == 30
    assert doc["agent"]["model_name"] == "policy-v1"
    diagnostics = json.loads((tmp_path / "r1" / "diagnostics.json").read_text(encoding="utf-8"))
    assert diagnostics == {"phase": "graded"}


async def test_the_official_call_keeps_several_sample_reports_unattributed(tmp_path: Path) -> None:
    from osmosis_rollout.trajectory import save_trajectory

    report = TrajectoryReport(samples={"a": _report(2), "b": _report(2)})
    await save_trajectory(
        rollout_id="r2", result=_result(_sample()), report=report, artifact_root=tmp_path
    )
    doc = json.loads((tmp_path / "r2" / "trajectory.json").read_text(encoding="utf-8"))
    assert set(doc["extra"]["osmosis"]["unmatched_sample_reports"]) == {"a", "b"}
    assert all("llm_call_count" not in step for step in doc["steps"])


def test_save_trajectory_is_a_coroutine_function_and_write_trajectory_returns_the_path(
    tmp_path: Path,
) -> None:
    import inspect

    from osmosis_rollout.trajectory import save_trajectory, write_trajectory

    assert inspect.iscoroutinefunction(save_trajectory)
    assert (
        write_trajectory(tmp_path, "r3", _result(_sample())) == tmp_path / "r3" / "trajectory.json"
    )
