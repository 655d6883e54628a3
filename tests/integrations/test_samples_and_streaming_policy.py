"""The streaming policy's precedence, and samples whose chat conversion fails."""

from __future__ import annotations

import logging

import pytest

from osmosis_rollout.context import RolloutContext
from osmosis_rollout.errors import ConfigError
from osmosis_rollout.integrations.agents.openai_agents import SessionSampleSource
from osmosis_rollout.integrations.agents.strands import StrandsAgentSampleSource
from osmosis_rollout.integrations.streaming import STREAMING_ENV, resolve_streaming


def hinted(streaming: object) -> RolloutContext:
    ctx = RolloutContext(chat_completions_url="http://127.0.0.1:1/v1", rollout_id="r1")
    ctx.streaming = streaming  # type: ignore[attr-defined]
    return ctx


def test_without_any_setting_calls_stream() -> None:
    assert resolve_streaming() is True
    assert resolve_streaming(ctx=RolloutContext(rollout_id="r1")) is True


def test_the_context_hint_decides_when_nothing_else_does() -> None:
    assert resolve_streaming(ctx=hinted(False)) is False
    assert resolve_streaming(ctx=hinted(True)) is True
    assert resolve_streaming(ctx=hinted("no")) is True  # only a real bool counts


def test_the_hint_is_read_from_the_active_context() -> None:
    with hinted(False):
        assert resolve_streaming() is False


@pytest.mark.parametrize(("mode", "expected"), [("always", True), ("NEVER", False)])
def test_the_environment_beats_the_hint(
    monkeypatch: pytest.MonkeyPatch, mode: str, expected: bool
) -> None:
    monkeypatch.setenv(STREAMING_ENV, mode)

    assert resolve_streaming(ctx=hinted(not expected)) is expected


def test_auto_in_the_environment_defers_to_the_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STREAMING_ENV, "auto")

    assert resolve_streaming(ctx=hinted(False)) is False


def test_an_explicit_choice_beats_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STREAMING_ENV, "always")

    assert resolve_streaming(False, hinted(True)) is False


def test_an_unknown_mode_names_the_valid_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(STREAMING_ENV, "sometimes")

    with pytest.raises(ConfigError, match=r"'sometimes'.*auto, always, never"):
        resolve_streaming()


class FakeSession:
    def __init__(self, items: list[dict[str, object]]) -> None:
        self.items = items

    async def get_items(self, limit: int | None = None) -> list[dict[str, object]]:
        return list(self.items if limit is None else self.items[-limit:])


class FakeAgent:
    def __init__(self, messages: list[dict[str, object]]) -> None:
        self.messages = messages


async def test_an_openai_agents_sample_keeps_its_items_when_conversion_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    items: list[dict[str, object]] = [{"role": "user", "content": "hi"}, {"type": "mystery"}]

    with caplog.at_level(logging.WARNING):
        sample = await SessionSampleSource(FakeSession(items)).get_sample()

    assert list(sample.messages) == items
    assert sample.trajectory_messages is None
    assert "Failed to convert OpenAI Agents messages for trajectory persistence" in caplog.text


async def test_a_strands_sample_keeps_its_messages_when_formatting_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages: list[dict[str, object]] = [{"role": "user", "content": [{"mystery": 1}]}]

    with caplog.at_level(logging.WARNING):
        sample = await StrandsAgentSampleSource(FakeAgent(messages)).get_sample()

    assert list(sample.messages) == messages
    assert sample.trajectory_messages is None
    assert "Failed to convert Strands messages for trajectory persistence" in caplog.text
