"""Cassette files are read through a model: a malformed one fails naming the file and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from osmosis_rollout.errors import CassetteFileError, PolicyError
from osmosis_rollout.policy import ChatReply, ChatRequest, RecordingPolicy, ToolCall
from osmosis_rollout.policy.cassette import CassetteDocument, read_cassette

PROMPT = [{"role": "user", "content": "What is 2 + 3?"}]


def request(row_key: str = "row-1") -> ChatRequest:
    return ChatRequest(
        messages=PROMPT, tools=[], params={}, rollout_id="r1", row_key=row_key, attempt=0
    )


async def record(cassette_dir: Path) -> Path:
    """Record one tool-call reply for ``row-1`` and return its cassette file."""

    def policy(_: ChatRequest) -> ChatReply:
        return ChatReply(None, [ToolCall("add", {"a": 2, "b": 3}, id="call_1")], "tool_calls")

    await RecordingPolicy(policy, cassette_dir, mode="once").complete(request())
    return cassette_dir / "row-1" / "attempt-0.json"


def rewrite(path: Path, change: Any) -> None:
    document = json.loads(path.read_text(encoding="utf-8"))
    change(document)
    path.write_text(json.dumps(document), encoding="utf-8")


async def replay_error(cassette_dir: Path) -> str:
    with pytest.raises(CassetteFileError) as caught:
        await RecordingPolicy(None, cassette_dir, mode="none").complete(request())
    assert isinstance(caught.value, PolicyError)
    return str(caught.value)


async def test_a_recorded_cassette_reads_back_as_the_model(tmp_path: Path) -> None:
    path = await record(tmp_path)

    document = read_cassette(path)

    assert isinstance(document, CassetteDocument)
    assert document.version == 1 and document.row_key == "row-1" and document.attempt == 0
    [interaction] = document.interactions
    assert interaction.request.messages == [{**PROMPT[0]}]
    assert interaction.response.finish_reason == "tool_calls"
    assert interaction.response.tool_calls[0].name == "add"
    assert interaction.response.to_reply() == ChatReply(
        None, [ToolCall("add", {"a": 2, "b": 3}, id="call_1")], "tool_calls"
    )


async def test_a_tool_call_without_a_name_fails_naming_the_file_and_the_field(
    tmp_path: Path,
) -> None:
    path = await record(tmp_path)
    rewrite(path, lambda d: d["interactions"][0]["response"]["tool_calls"][0].pop("name"))

    message = await replay_error(tmp_path)

    assert str(path) in message
    assert "interactions[0].response.tool_calls[0].name" in message
    assert "required" in message.lower()
    assert "re-record" in message


async def test_a_misspelled_key_is_named_as_unknown(tmp_path: Path) -> None:
    path = await record(tmp_path)
    rewrite(path, lambda d: d.__setitem__("interaction", d.pop("interactions")))

    message = await replay_error(tmp_path)

    assert "interaction:" in message and "not permitted" in message
    assert "interactions:" in message and "required" in message.lower()


async def test_a_cassette_of_another_format_version_is_refused(tmp_path: Path) -> None:
    path = await record(tmp_path)
    rewrite(path, lambda d: d.__setitem__("version", 2))

    message = await replay_error(tmp_path)

    assert "version:" in message and "1" in message


async def test_a_wrongly_typed_field_is_not_coerced(tmp_path: Path) -> None:
    path = await record(tmp_path)
    rewrite(path, lambda d: d.__setitem__("attempt", "0"))

    message = await replay_error(tmp_path)

    assert "attempt:" in message


async def test_broken_json_names_the_line_and_column(tmp_path: Path) -> None:
    path = await record(tmp_path)
    path.write_text('{"version": 1,\n  "interactions": [\n', encoding="utf-8")

    message = await replay_error(tmp_path)

    assert str(path) in message and "line 3" in message
