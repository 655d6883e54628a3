"""The protocol's wire models: required fields, id safety, key and timeout validation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from osmosis_rollout import (
    POLLING_LEASE_HEADER,
    CancelRolloutsRequest,
    ExecutionRequest,
    RolloutErrorCategory,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutResultResponse,
    RolloutSample,
    RolloutStatus,
)

UNSAFE_IDS = ["", ".", "..", "a/b", "../etc", "a\\b", "a\x00b", "/abs"]
SAFE_IDS = ["rollout-1", "r_2.attempt-0", "ABC123", "with space", "ünïcode", "a..b"]


def _required(model: type[BaseModel]) -> set[str]:
    return {name for name, field in model.model_fields.items() if field.is_required()}


def _init_body(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "rollout_id": "r1",
        "initial_messages": [{"role": "user", "content": "hi"}],
        "chat_completions_url": "http://127.0.0.1:1/v1/rollouts/r1",
    }
    body.update(overrides)
    return body


def test_required_fields_of_every_wire_model_stay_pinned() -> None:
    assert _required(RolloutInitRequest) == {
        "initial_messages",
        "rollout_id",
        "chat_completions_url",
    }
    assert _required(RolloutInitResponse) == {
        "rollout_id",
        "status",
        "polling_lease_token",
        "result_wait_timeout_sec",
        "polling_lease_timeout_sec",
    }
    assert _required(RolloutResultResponse) == {"rollout_id", "status"}
    assert _required(ExecutionRequest) == {"id", "prompt"}
    assert set(RolloutResultResponse.model_fields) == {
        "rollout_id",
        "status",
        "sample",
        "err_message",
        "err_category",
    }


def test_init_request_optional_fields_default_as_the_protocol_says() -> None:
    request = RolloutInitRequest.model_validate(_init_body())
    assert request.grade is True
    assert request.label is None and request.metadata is None
    assert request.llm_api_key is None
    assert request.agent_timeout_sec is None and request.grader_timeout_sec is None


def test_init_request_ignores_removed_callback_fields() -> None:
    body = _init_body(completion_callback_url="http://x/cb", controller_api_key="k")
    request = RolloutInitRequest.model_validate(body)
    assert "completion_callback_url" not in request.model_dump()


def test_status_and_category_vocabularies_match_the_wire() -> None:
    assert {s.value for s in RolloutStatus} == {
        "queued",
        "running",
        "grading",
        "success",
        "failure",
        "cancelled",
        "unknown",
    }
    assert {c.value for c in RolloutErrorCategory} == {
        "timeout",
        "lease_expired",
        "validation_error",
        "http_error",
        "agent_error",
        "internal_error",
    }
    assert {s for s in RolloutStatus if s.is_terminal} == {
        RolloutStatus.SUCCESS,
        RolloutStatus.FAILURE,
        RolloutStatus.CANCELLED,
    }


def test_polling_lease_header_name_is_pinned() -> None:
    assert POLLING_LEASE_HEADER == "X-Osmosis-Rollout-Lease"


@pytest.mark.parametrize("rollout_id", UNSAFE_IDS)
def test_execution_request_rejects_an_id_that_is_not_one_path_segment(rollout_id: str) -> None:
    with pytest.raises(ValidationError, match="single path segment"):
        ExecutionRequest(id=rollout_id, prompt=[])


@pytest.mark.parametrize("rollout_id", SAFE_IDS)
def test_execution_request_accepts_a_single_segment_id(rollout_id: str) -> None:
    assert ExecutionRequest(id=rollout_id, prompt=[]).id == rollout_id


@pytest.mark.parametrize("rollout_id", UNSAFE_IDS)
def test_init_request_rejects_an_id_that_is_not_one_path_segment(rollout_id: str) -> None:
    with pytest.raises(ValidationError, match="rollout_id"):
        RolloutInitRequest.model_validate(_init_body(rollout_id=rollout_id))


@pytest.mark.parametrize("rollout_id", SAFE_IDS)
def test_init_request_accepts_a_single_segment_id(rollout_id: str) -> None:
    request = RolloutInitRequest.model_validate(_init_body(rollout_id=rollout_id))
    assert request.rollout_id == rollout_id


def test_an_explicitly_empty_llm_api_key_is_rejected() -> None:
    with pytest.raises(ValidationError, match="llm_api_key"):
        RolloutInitRequest.model_validate(_init_body(llm_api_key=""))


def test_an_omitted_or_real_llm_api_key_is_accepted() -> None:
    assert RolloutInitRequest.model_validate(_init_body(llm_api_key=None)).llm_api_key is None
    assert RolloutInitRequest.model_validate(_init_body(llm_api_key="sk")).llm_api_key == "sk"


@pytest.mark.parametrize("field", ["agent_timeout_sec", "grader_timeout_sec"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_timeouts_are_rejected_at_validation(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match="finite"):
        RolloutInitRequest.model_validate(_init_body(**{field: value}))
    with pytest.raises(ValidationError, match="finite"):
        ExecutionRequest.model_validate({"id": "r", "prompt": [], field: value})


def test_init_response_requires_the_lease_to_outlast_the_result_wait() -> None:
    fields = {"rollout_id": "r", "status": "queued", "polling_lease_token": "t"}
    ok = RolloutInitResponse.model_validate(
        {**fields, "result_wait_timeout_sec": 30, "polling_lease_timeout_sec": 120}
    )
    assert ok.polling_lease_timeout_sec == 120
    with pytest.raises(ValidationError, match="polling_lease_timeout_sec"):
        RolloutInitResponse.model_validate(
            {**fields, "result_wait_timeout_sec": 30, "polling_lease_timeout_sec": 30}
        )
    with pytest.raises(ValidationError, match="result_wait_timeout_sec"):
        RolloutInitResponse.model_validate(
            {**fields, "result_wait_timeout_sec": 0, "polling_lease_timeout_sec": 120}
        )


def test_init_response_requires_a_non_empty_lease_token() -> None:
    with pytest.raises(ValidationError, match="polling_lease_token"):
        RolloutInitResponse.model_validate(
            {
                "rollout_id": "r",
                "status": "queued",
                "polling_lease_token": "",
                "result_wait_timeout_sec": 30,
                "polling_lease_timeout_sec": 120,
            }
        )


def test_result_response_round_trips_a_terminal_result() -> None:
    body = {
        "rollout_id": "r",
        "status": "failure",
        "sample": None,
        "err_message": "boom",
        "err_category": "agent_error",
    }
    parsed = RolloutResultResponse.model_validate(body)
    assert parsed.err_category is RolloutErrorCategory.AGENT_ERROR
    assert parsed.model_dump(mode="json") == body


def test_a_results_notes_are_kept_by_our_model_and_ignored_by_the_officials() -> None:
    class OfficialResult(BaseModel):
        """The official SDK's ``RolloutResultResponse``: pydantic's default config."""

        rollout_id: str
        status: RolloutStatus
        sample: RolloutSample | None = None
        err_message: str | None = None
        err_category: RolloutErrorCategory | None = None

    body = {
        "rollout_id": "r",
        "status": "failure",
        "sample": None,
        "err_message": "boom",
        "err_category": "agent_error",
        "notes": {"phase": "grader", "where": "main.py:9 in grade", "grader_reason": "no"},
    }
    assert RolloutResultResponse.model_validate(body).model_dump(mode="json") == body
    official = OfficialResult.model_validate(body)
    assert official.err_message == "boom" and "notes" not in official.model_dump()


def test_cancel_request_defaults_to_cancelling_nothing() -> None:
    request = CancelRolloutsRequest()
    assert request.ids is None and request.prefix is None and request.all is False


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(codec=None), max_size=8))
def test_a_single_path_segment_is_what_the_hosts_path_says_is_one(value: str) -> None:
    import os
    from pathlib import PurePosixPath, PureWindowsPath

    from osmosis_rollout._internal.ids import is_single_path_segment

    pure_path = PureWindowsPath if os.name == "nt" else PurePosixPath
    expected = (
        value not in {"", ".", ".."}
        and not any(ch in value for ch in "/\\\x00")
        and pure_path(value).name == value
    )
    assert is_single_path_segment(value) is expected
