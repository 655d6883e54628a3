"""Record and replay: cassettes written from one policy answer identically with it removed."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from openai import AsyncOpenAI

from osmosis_rollout.controller.policy_server import PolicyServer
from osmosis_rollout.errors import CassetteMissError
from osmosis_rollout.policy import (
    ChatReply,
    ChatRequest,
    LiteLLMPolicy,
    RecordingPolicy,
    ToolCall,
    normalise_request,
)

SYSTEM = {"role": "system", "content": "You are a calculator."}


class Calculator:
    """A scripted model that counts its calls, so tests can tell replay from recording."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ChatRequest) -> ChatReply:
        self.calls += 1
        if request.messages[-1]["role"] == "tool":
            return ChatReply(f"The answer is {request.messages[-1]['content']}.")
        return ChatReply(None, [ToolCall("add", {"a": 2, "b": 3})], "tool_calls")


def _request(
    prompt: str = "What is 2 + 3?",
    *,
    rollout_id: str = "r1",
    row_key: str | None = "row-1",
    attempt: int = 0,
    extra: list[dict[str, Any]] | None = None,
    **params: Any,
) -> ChatRequest:
    messages = [SYSTEM, {"role": "user", "content": prompt}, *(extra or [])]
    return ChatRequest(
        messages=messages,
        tools=[],
        params=params,
        rollout_id=rollout_id,
        row_key=row_key,
        attempt=attempt,
    )


async def _conversation(server: PolicyServer, rollout_id: str, prompt: str) -> list[dict[str, Any]]:
    """Tool call, tool result, final answer through the openai client; returns both replies."""
    messages: list[dict[str, Any]] = [SYSTEM, {"role": "user", "content": prompt}]
    replies = []
    async with AsyncOpenAI(
        base_url=server.rollout_url(rollout_id), api_key=server.api_key, max_retries=0, timeout=10
    ) as client:
        for _ in range(2):
            completion = await client.chat.completions.create(
                model="osmosis-rollout", messages=messages, temperature=0, stream=False
            )
            message = completion.choices[0].message.model_dump(exclude_none=True)
            replies.append(message)
            messages.append(message)
            for call in message.get("tool_calls", []):
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": "5"})
    return replies


async def test_replay_with_the_original_policy_removed_gives_identical_replies(
    serve: Callable[..., PolicyServer], tmp_path: Path
) -> None:
    calculator = Calculator()
    recorder = serve(RecordingPolicy(calculator, tmp_path, mode="once"))
    recorder.bind("rec-1", row_key="row-1", attempt=0)
    recorded = await _conversation(recorder, "rec-1", "What is 2 + 3?")
    assert calculator.calls == 2
    assert recorded[0]["tool_calls"][0]["function"]["name"] == "add"
    assert recorded[1]["content"] == "The answer is 5."

    cassette = tmp_path / "row-1" / "attempt-0.json"
    text = cassette.read_text()
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert document["row_key"] == "row-1" and document["version"] == 1
    assert [set(i) for i in document["interactions"]] == [{"key", "request", "response"}] * 2
    assert document["interactions"][0]["request"]["params"] == {"temperature": 0}

    replayer = serve(RecordingPolicy(None, tmp_path, mode="none"))
    replayer.bind("replay-9", row_key="row-1", attempt=0)
    replayed = await _conversation(replayer, "replay-9", "What is 2 + 3?")
    assert replayed == recorded
    assert replayer.log("replay-9").n_errors == 0


async def test_changed_prompt_in_none_mode_fails_naming_the_difference(
    serve: Callable[..., PolicyServer], tmp_path: Path
) -> None:
    await RecordingPolicy(Calculator(), tmp_path, mode="once").complete(_request())
    replay = RecordingPolicy(None, tmp_path, mode="none")
    with pytest.raises(CassetteMissError) as caught:
        await replay.complete(_request("What is 7 + 3?", rollout_id="r-42"))
    message = str(caught.value)
    assert "rollout 'r-42'" in message and "row 'row-1', attempt 0" in message
    assert "messages[1]" in message
    assert "What is 2 + 3?" in message and "What is 7 + 3?" in message
    assert "new_episodes" in message

    # Through the endpoint the client sees the same explanation.
    server = serve(replay)
    server.bind("r-43", row_key="row-1")
    async with AsyncOpenAI(
        base_url=server.rollout_url("r-43"), api_key=server.api_key, max_retries=0
    ) as client:
        with pytest.raises(Exception) as http_error:
            await client.chat.completions.create(
                model="osmosis-rollout",
                messages=[SYSTEM, {"role": "user", "content": "What is 9 + 9?"}],
            )
    assert "What is 9 + 9?" in str(http_error.value)
    assert "CassetteMissError" in (server.log("r-43").calls[0].error or "")


async def test_miss_reports_changed_params_and_a_missing_cassette(tmp_path: Path) -> None:
    await RecordingPolicy(Calculator(), tmp_path, mode="once").complete(_request(temperature=0))
    replay = RecordingPolicy(None, tmp_path, mode="none")
    with pytest.raises(CassetteMissError, match=r"different params \['temperature'\]"):
        await replay.complete(_request(temperature=0.7))
    with pytest.raises(CassetteMissError, match="does not exist"):
        await replay.complete(_request(row_key="row-2"))


async def test_no_secret_reaches_a_cassette(
    serve: Callable[..., PolicyServer],
    stub_provider: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider_key = "sk-test-provider-key-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", provider_key)
    inner = LiteLLMPolicy("openai/stub-model", api_base=stub_provider.base_url)
    server = serve(RecordingPolicy(inner, tmp_path, mode="all"))
    server.bind("r1", row_key="row-1")
    async with AsyncOpenAI(
        base_url=server.rollout_url("r1"), api_key=server.api_key, max_retries=0, timeout=30
    ) as client:
        completion = await client.chat.completions.create(
            model="osmosis-rollout",
            messages=[{"role": "user", "content": f"my key is {provider_key}"}],
            extra_body={"api_key": provider_key, "metadata": {"authorization": server.api_key}},
        )
    assert completion.choices[0].message.content == "stub says hi"
    assert stub_provider.headers[0]["authorization"] == f"Bearer {provider_key}"
    files = list(tmp_path.rglob("*.json"))
    assert files
    for file in files:
        text = file.read_text()
        assert provider_key not in text
        assert server.api_key not in text
        assert "[REDACTED]" in text


async def test_secret_echoed_by_a_policy_is_redacted_and_secret_keys_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-abcdefgh12345")

    async def echo(request: ChatRequest) -> dict[str, Any]:
        return {"role": "assistant", "content": "token tok-abcdefgh12345", "api_key": "x"}

    policy = RecordingPolicy(echo, tmp_path, mode="once", secrets=["extra-secret-42"])
    await policy.complete(_request("use extra-secret-42", Authorization="Bearer abc"))
    text = (tmp_path / "row-1" / "attempt-0.json").read_text()
    assert "tok-abcdefgh12345" not in text and "extra-secret-42" not in text
    assert "Bearer abc" not in text and "Authorization" not in text


async def test_once_records_a_missing_cassette_and_only_replays_an_existing_one(
    tmp_path: Path,
) -> None:
    first = Calculator()
    recorder = RecordingPolicy(first, tmp_path, mode="once")
    reply = await recorder.complete(_request())
    follow_up = [reply.to_message(), {"role": "tool", "tool_call_id": "x", "content": "5"}]
    await recorder.complete(_request(extra=follow_up))
    assert first.calls == 2

    second = Calculator()
    again = RecordingPolicy(second, tmp_path, mode="once")
    assert (await again.complete(_request(rollout_id="other"))).tool_calls[0].name == "add"
    with pytest.raises(CassetteMissError):
        await again.complete(_request("new question"))
    assert second.calls == 0


async def test_new_episodes_replays_hits_and_records_misses(tmp_path: Path) -> None:
    await RecordingPolicy(Calculator(), tmp_path, mode="once").complete(_request())
    inner = Calculator()
    policy = RecordingPolicy(inner, tmp_path, mode="new_episodes")
    await policy.complete(_request())
    assert inner.calls == 0
    await policy.complete(_request("What is 4 + 4?"))
    assert inner.calls == 1
    document = json.loads((tmp_path / "row-1" / "attempt-0.json").read_text())
    prompts = [i["request"]["messages"][1]["content"] for i in document["interactions"]]
    assert prompts == ["What is 2 + 3?", "What is 4 + 4?"]


async def test_all_mode_re_records_every_touched_cassette(tmp_path: Path) -> None:
    await RecordingPolicy(Calculator(), tmp_path, mode="once").complete(_request("old question"))
    inner = Calculator()
    policy = RecordingPolicy(inner, tmp_path, mode="all")
    await policy.complete(_request())
    await policy.complete(_request())
    assert inner.calls == 2
    document = json.loads((tmp_path / "row-1" / "attempt-0.json").read_text())
    prompts = [i["request"]["messages"][1]["content"] for i in document["interactions"]]
    assert prompts == ["What is 2 + 3?", "What is 2 + 3?"]


async def test_one_row_can_be_re_recorded_alone(tmp_path: Path) -> None:
    recorder = RecordingPolicy(Calculator(), tmp_path, mode="once")
    for row in ("row-1", "row-2"):
        for attempt in (0, 1):
            await recorder.complete(_request(row_key=row, attempt=attempt))
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.json")) == [
        "row-1/attempt-0.json",
        "row-1/attempt-1.json",
        "row-2/attempt-0.json",
        "row-2/attempt-1.json",
    ]
    before = (tmp_path / "row-1" / "attempt-0.json").read_text()
    (tmp_path / "row-2" / "attempt-0.json").unlink()
    inner = Calculator()
    rerun = RecordingPolicy(inner, tmp_path, mode="once")
    for row in ("row-1", "row-2"):
        await rerun.complete(_request(row_key=row))
    assert inner.calls == 1, "only the deleted row is recorded again"
    assert (tmp_path / "row-1" / "attempt-0.json").read_text() == before


async def test_unkeyed_conversations_share_one_file_whatever_the_rollout_id(tmp_path: Path) -> None:
    recorder = RecordingPolicy(Calculator(), tmp_path, mode="once")
    reply = await recorder.complete(_request(row_key=None, rollout_id="a"))
    follow_up = [reply.to_message(), {"role": "tool", "tool_call_id": "x", "content": "5"}]
    await recorder.complete(_request(row_key=None, rollout_id="a", extra=follow_up))
    files = list((tmp_path / "_unkeyed").glob("*.json"))
    assert len(files) == 1
    replay = RecordingPolicy(None, tmp_path, mode="none")
    answer = await replay.complete(_request(row_key=None, rollout_id="b", extra=follow_up))
    assert answer.content == "The answer is 5."


def test_request_key_ignores_tool_call_ids_and_bookkeeping_params() -> None:
    def conversation(call_id: str, **params: Any) -> ChatRequest:
        return _request(
            extra=[
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {"name": "add", "arguments": "{}"},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call_id, "content": "5"},
            ],
            **params,
        )

    assert normalise_request(conversation("call_abc", user="u1")) == normalise_request(
        conversation("call_xyz", user="u2")
    )
    assert normalise_request(conversation("call_abc", temperature=0)) != normalise_request(
        conversation("call_abc", temperature=1)
    )


def test_unsafe_row_keys_become_safe_distinct_directories(tmp_path: Path) -> None:
    from osmosis_rollout.policy.recording import cassette_path

    paths = {
        cassette_path(tmp_path, _request(row_key=key)) for key in ("../evil", "a/b", "a_b", "..")
    }
    assert len(paths) == 4
    for path in paths:
        assert path.parent.parent == tmp_path
        assert path.parent.name not in {"..", "."}


def test_a_namespaced_row_key_nests_its_folders_inside_the_cassette_dir(tmp_path: Path) -> None:
    from osmosis_rollout.policy.recording import row_folder

    assert row_folder(tmp_path, "suite_a/data/test.jsonl::row-3") == (
        tmp_path / "suite_a" / "data" / "test.jsonl" / "row-3"
    )
    assert row_folder(tmp_path, "test.jsonl.row-3") == tmp_path / "test.jsonl.row-3"
    escaping = row_folder(tmp_path, "../../etc::../x")
    assert escaping.is_relative_to(tmp_path)
    assert ".." not in escaping.relative_to(tmp_path).parts


def test_bad_mode_and_all_without_inner_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown record mode 'sometimes'"):
        RecordingPolicy(None, tmp_path, mode="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs an inner policy"):
        RecordingPolicy(None, tmp_path, mode="all")
