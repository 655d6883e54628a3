"""``evaluate_rubric`` called exactly as the official SDK 0.3.8 documents it, and its errors.

The official signature (``osmosis_ai.eval.rubric.engine.evaluate_rubric``) is keyword-only:
``solution_str, rubric, model, ground_truth, original_input, metadata, score_min, score_max,
api_key, timeout, system_prompt``; it raises ``MissingAPIKeyError`` before calling when the
provider's key is missing, ``ModelNotFoundError`` for an unknown model and
``ProviderRequestError`` for other provider failures. The judge here is our own policy
endpoint on 127.0.0.1, reached through LiteLLM's OpenAI provider (``OPENAI_BASE_URL``), so
the official call shape runs unchanged; provider faults are injected by that endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from _support.net import free_port

import osmosis_rollout
from osmosis_rollout import (
    MissingAPIKeyError,
    ModelNotFoundError,
    ProviderRequestError,
    RubricResult,
    evaluate_rubric,
)
from osmosis_rollout.errors import JudgeError
from osmosis_rollout.policy import ChatRequest
from osmosis_rollout.policy.faults import Faults

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RUBRIC = "1.0 when the answer is 42 and shows the multiplication, else 0.0."


class Judge:
    """A scripted judge that keeps the requests it answered."""

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    def __call__(self, request: ChatRequest) -> str:
        self.requests.append(request)
        return self.replies.pop(0)


def _verdict(score: float, explanation: str = "because") -> str:
    return json.dumps({"score": score, "explanation": explanation})


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Start a policy endpoint; LiteLLM's OpenAI provider is pointed at it by environment."""
    from osmosis_rollout.controller import PolicyServer

    started: list[Any] = []

    def start(judge: Judge, faults: Faults | None = None) -> Any:
        server = PolicyServer(judge, faults=faults).start()
        started.append(server)
        monkeypatch.setenv("OPENAI_BASE_URL", server.rollout_url("judge"))
        monkeypatch.delenv("OPENAI_API_BASE", raising=False)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()


async def test_the_official_keyword_call_is_judged_with_every_argument_in_the_prompt(
    endpoint: Any,
) -> None:
    judge = Judge(_verdict(7.5, "right answer, shown"))
    server = endpoint(judge)
    result = await evaluate_rubric(
        solution_str="6 x 7 = 42",
        rubric=RUBRIC,
        model="openai/judge-model",
        ground_truth="42",
        original_input="What is 6 times 7?",
        metadata={"difficulty": "easy"},
        score_min=0.0,
        score_max=10.0,
        api_key=server.api_key,
        timeout=10.0,
        system_prompt="You grade arithmetic.",
    )
    assert isinstance(result, RubricResult)
    assert (result.score, result.explanation) == (7.5, "right answer, shown")
    [request] = judge.requests
    system, user = request.messages[0]["content"], request.messages[1]["content"]
    assert system.startswith("You grade arithmetic.")
    assert "0.0 to 10.0" in user
    for quoted in (RUBRIC, "6 x 7 = 42", "42", "What is 6 times 7?", '"difficulty": "easy"'):
        assert quoted in user


async def test_the_key_comes_from_the_providers_environment_variable(
    endpoint: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = endpoint(Judge(_verdict(1.0)))
    monkeypatch.setenv("OPENAI_API_KEY", server.api_key)
    result = await evaluate_rubric(solution_str="42", rubric=RUBRIC, model="openai/judge-model")
    assert result.score == 1.0


@pytest.mark.parametrize(
    ("model", "variable"),
    [
        ("openai/gpt-5-mini", "OPENAI_API_KEY"),
        ("gpt-5-mini", "OPENAI_API_KEY"),
        ("anthropic/claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
        ("claude-3-haiku", "ANTHROPIC_API_KEY"),
        ("gemini/gemini-2.5-pro", "GEMINI_API_KEY"),
        ("grok-4", "XAI_API_KEY"),
        ("mistral/mistral-large", "MISTRAL_API_KEY"),
    ],
)
async def test_a_missing_key_is_refused_before_any_call(
    model: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(MissingAPIKeyError, match=variable) as caught:
        await evaluate_rubric(solution_str="42", rubric=RUBRIC, model=model)
    assert isinstance(caught.value, RuntimeError)


async def test_an_unknown_model_raises_model_not_found(endpoint: Any) -> None:
    judge = Judge(_verdict(1.0))
    server = endpoint(judge, Faults(fail_first=1, fail_status=404))
    with pytest.raises(ModelNotFoundError) as caught:
        await evaluate_rubric(
            solution_str="42", rubric=RUBRIC, model="openai/no-such-model", api_key=server.api_key
        )
    error = caught.value
    assert isinstance(error, ProviderRequestError)
    assert (error.provider, error.model) == ("openai", "no-such-model")
    assert "was not found" in str(error)
    assert judge.requests == []


async def test_a_provider_failure_is_wrapped_with_provider_and_model(endpoint: Any) -> None:
    server = endpoint(Judge(_verdict(1.0)), Faults(fail_first=1, fail_status=400))
    with pytest.raises(ProviderRequestError) as caught:
        await evaluate_rubric(
            solution_str="42", rubric=RUBRIC, model="openai/judge-model", api_key=server.api_key
        )
    assert type(caught.value) is ProviderRequestError
    assert (caught.value.provider, caught.value.model) == ("openai", "judge-model")
    assert "injected fault: HTTP 400" in caught.value.detail
    assert isinstance(caught.value.__cause__, Exception)


async def test_a_rejected_key_is_a_provider_error(endpoint: Any) -> None:
    endpoint(Judge(_verdict(1.0)))
    with pytest.raises(ProviderRequestError) as caught:
        await evaluate_rubric(
            solution_str="42", rubric=RUBRIC, model="openai/judge-model", api_key="wrong-key"
        )
    assert caught.value.provider == "openai"


async def test_an_unreachable_provider_is_a_provider_error(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()  # a loopback port nothing listens on
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ProviderRequestError):
        await evaluate_rubric(
            solution_str="42",
            rubric=RUBRIC,
            model="openai/judge-model",
            api_key="k",
            timeout=5.0,
            num_retries=0,
            max_retries=0,
        )


async def test_no_usable_verdict_is_a_provider_request_error(endpoint: Any) -> None:
    server = endpoint(Judge("no json", "still none"))
    with pytest.raises(ProviderRequestError) as caught:
        await evaluate_rubric(
            solution_str="42",
            rubric=RUBRIC,
            model="openai/judge-model",
            api_key=server.api_key,
            max_retries=1,
        )
    assert isinstance(caught.value, JudgeError)
    assert caught.value.attempts == 2


def test_the_errors_are_exported_where_the_official_sdk_exports_them() -> None:
    import osmosis_rollout.rubric as rubric

    for module in (osmosis_rollout, rubric):
        for name in ("MissingAPIKeyError", "ModelNotFoundError", "ProviderRequestError"):
            assert name in module.__all__
    error = ProviderRequestError("openai", "m", "  boom  ")
    assert (error.provider, error.model, error.detail) == ("openai", "m", "boom")
    assert str(error) == "Provider 'openai' request for model 'm' failed. boom"
    assert issubclass(ModelNotFoundError, ProviderRequestError)


def test_a_rubric_result_is_built_as_the_official_dataclass_is() -> None:
    result = RubricResult(score=0.5, explanation="half")
    assert (result.score, result.explanation, result.clamped_from) == (0.5, "half", None)


async def test_the_solution_may_not_be_given_twice() -> None:
    with pytest.raises(TypeError, match="solution twice"):
        await evaluate_rubric(RUBRIC, "42", solution_str="42", policy=_verdict(1.0))


async def test_our_keywords_combine_with_the_official_ones() -> None:
    judge = Judge("not json", _verdict(3.0, "ok"))
    result = await evaluate_rubric(
        solution_str="42", rubric=RUBRIC, score_max=5.0, policy=judge, max_retries=1
    )
    assert (result.score, result.attempts) == (3.0, 2)


async def test_timeout_bounds_a_policy_judge() -> None:
    import asyncio

    async def slow(request: ChatRequest) -> str:
        await asyncio.sleep(30)
        return _verdict(1.0)

    with pytest.raises(TimeoutError):
        await evaluate_rubric(solution_str="42", rubric=RUBRIC, policy=slow, timeout=0.05)


async def test_the_request_is_the_officials_temperature_zero_and_the_verdict_schema(
    endpoint: Any,
) -> None:
    from osmosis_rollout.grading.judge_provider import VERDICT_SCHEMA

    judge = Judge(_verdict(1.0), _verdict(1.0))
    server = endpoint(judge)
    # A model LiteLLM knows takes a JSON schema gets one; an unknown model gets json_object.
    await evaluate_rubric(
        solution_str="42", rubric=RUBRIC, model="openai/gpt-4o-mini", api_key=server.api_key
    )
    await evaluate_rubric(
        solution_str="42", rubric=RUBRIC, model="openai/judge-model", api_key=server.api_key
    )
    known, unknown = judge.requests
    assert known.params == {
        "response_format": {"type": "json_schema", "json_schema": VERDICT_SCHEMA},
        "temperature": 0,
    }
    assert unknown.params == {"response_format": {"type": "json_object"}, "temperature": 0}
    assert [m["role"] for m in known.messages] == ["system", "user"]


@pytest.mark.parametrize(
    ("reply", "detail"),
    [
        ('{"score": "1.0", "explanation": "a string score"}', "numeric 'score'"),
        ('Score: {"score": 1.0, "explanation": "prose around"}', "not valid JSON"),
        ('{"score": 1.0}', "non-empty 'explanation'"),
    ],
)
async def test_an_unusable_verdict_is_one_request_and_the_officials_error(
    endpoint: Any, reply: str, detail: str
) -> None:
    judge = Judge(reply, _verdict(1.0))
    server = endpoint(judge)
    with pytest.raises(ProviderRequestError, match=detail) as caught:
        await evaluate_rubric(
            solution_str="42", rubric=RUBRIC, model="openai/judge-model", api_key=server.api_key
        )
    assert len(judge.requests) == 1
    assert (caught.value.provider, caught.value.model) == ("openai", "judge-model")
    assert str(caught.value).startswith("Provider 'openai' request for model 'judge-model' failed.")


async def test_a_model_without_a_provider_is_a_provider_request_error_as_in_the_official() -> None:
    with pytest.raises(ProviderRequestError, match="provider/model") as caught:
        await evaluate_rubric(solution_str="42", rubric=RUBRIC, model="mystery-model")
    assert (caught.value.provider, caught.value.model) == ("", "mystery-model")
