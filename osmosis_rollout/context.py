"""The ambient rollout context, the sample source it holds, and the per-phase contexts.

``RolloutContext`` is what integrations look up (through :func:`get_rollout_context`) to find
the chat-completions URL and key of the rollout they run in, and where they register the
rollout's single :class:`SampleSource`. ``AgentWorkflowContext`` and ``GraderContext`` are
what ``AgentWorkflow.run`` and ``Grader.grade`` receive.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from osmosis_rollout.errors import NonFiniteRewardError
from osmosis_rollout.types import AgentWorkflowConfig, RolloutSample, RolloutStatus
from osmosis_rollout.types.sample import TERMINAL_STATUSES

logger = logging.getLogger(__name__)

CHAT_COMPLETIONS_URL_ENV = "OSMOSIS_CHAT_COMPLETIONS_URL"
API_KEY_ENV = "OSMOSIS_API_KEY"
ROLLOUT_ID_ENV = "OSMOSIS_ROLLOUT_ID"


class SampleSource(ABC):
    """Produces the rollout's one :class:`RolloutSample`; integrations register one per rollout."""

    @abstractmethod
    async def get_sample(self) -> RolloutSample:
        """Return the rollout's sample as it stands now."""

    async def get_preview(self, max_messages: int) -> RolloutSample | None:
        """Return an isolated copy of at most ``max_messages`` recent messages (opt-in)."""
        return None


rollout_contextvar: ContextVar[RolloutContext | None] = ContextVar(
    "rollout_contextvar", default=None
)


@dataclass
class RolloutProgress:
    """Live status of one rollout: ``queued`` -> ``running`` -> ``grading`` -> terminal.

    ``set_status`` ignores repeats and anything after a terminal status, wakes waiters, then
    calls ``on_status`` (whose errors are logged and dropped).
    """

    status: RolloutStatus = RolloutStatus.QUEUED
    changed: asyncio.Condition = field(default_factory=asyncio.Condition, repr=False)
    on_status: Callable[[RolloutStatus], None] | None = field(default=None, repr=False)

    async def set_status(self, status: RolloutStatus) -> None:
        """Move to ``status`` unless it is unchanged or the rollout already finished."""
        async with self.changed:
            if status is self.status or self.status in TERMINAL_STATUSES:
                return
            self.status = status
            self.changed.notify_all()
        if self.on_status is not None:
            try:
                self.on_status(status)
            except Exception:
                logger.warning("rollout status observer failed", exc_info=True)

    async def wait_for_change(self, timeout: float | None = None) -> RolloutStatus:
        """Wait (at most ``timeout`` seconds) for the status to change; return the status."""
        async with self.changed:
            if self.status in TERMINAL_STATUSES:
                return self.status
            before = self.status
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.changed.wait_for(lambda: self.status is not before)
            return self.status

    async def wait_for_status_change(self) -> RolloutStatus:
        """Wait, without a time limit, for the status to change (the official SDK's name)."""
        return await self.wait_for_change(None)


@dataclass
class RolloutContext:
    """Where a rollout's model calls go, and where its sample comes from.

    Empty ``chat_completions_url``, ``api_key`` and ``rollout_id`` fall back to the
    ``OSMOSIS_CHAT_COMPLETIONS_URL``, ``OSMOSIS_API_KEY`` and ``OSMOSIS_ROLLOUT_ID``
    environment variables. Entering the context makes it current for
    :func:`get_rollout_context`; leaving it sets the current context to ``None``.
    """

    chat_completions_url: str = ""
    api_key: str | None = None
    rollout_id: str = ""
    sample_source: SampleSource | None = None
    progress: RolloutProgress | None = None
    process_id: str | None = None
    preview_path: Path | None = None
    preview_enabled: bool = True
    streaming: bool | None = None
    """Whether integrations stream model calls; ``None`` = their default (stream, as production
    requires). The plugin sets ``False`` in-process, where its endpoint also answers plainly."""

    def __post_init__(self) -> None:
        if not self.chat_completions_url:
            self.chat_completions_url = os.environ.get(CHAT_COMPLETIONS_URL_ENV, "")
        if not self.api_key:
            self.api_key = os.environ.get(API_KEY_ENV)
        if not self.rollout_id:
            self.rollout_id = os.environ.get(ROLLOUT_ID_ENV, "")

    def __enter__(self) -> RolloutContext:
        rollout_contextvar.set(self)
        return self

    def __exit__(self, *_: object) -> None:
        rollout_contextvar.set(None)

    def set_sample_source(self, source: SampleSource) -> None:
        """Register the rollout's single sample source; a second one raises ``ValueError``."""
        if self.sample_source is not None:
            raise ValueError(
                "RolloutContext already has a sample source registered: a rollout produces one "
                "sample, so construct a single agent/session per rollout"
            )
        self.sample_source = source

    async def get_sample(self) -> RolloutSample | None:
        """The registered source's sample, or ``None`` when nothing was registered."""
        return None if self.sample_source is None else await self.sample_source.get_sample()

    async def set_status(self, status: RolloutStatus) -> None:
        """Report live progress (no-op without a ``progress`` tracker)."""
        if self.progress is not None:
            await self.progress.set_status(status)


def get_rollout_context() -> RolloutContext | None:
    """The rollout context the current task runs in, or ``None``."""
    return rollout_contextvar.get()


TConfig = TypeVar("TConfig", bound=AgentWorkflowConfig)


@dataclass
class AgentWorkflowContext(Generic[TConfig]):
    """What ``AgentWorkflow.run`` receives: the prompt messages, a private config copy, metadata."""

    prompt: list[dict[str, Any]]
    config: TConfig | None = None
    metadata: dict[str, Any] | None = None
    artifacts_dir: Path | None = None


@dataclass
class GraderContext:
    """What ``Grader.grade`` receives: the label, the sample to reward, metadata."""

    label: str | None = None
    sample: RolloutSample | None = None
    project_path: str | None = None
    metadata: dict[str, Any] | None = None
    artifacts_dir: Path | None = None

    def set_reward(self, reward: float) -> None:
        """Set the sample's reward; it must be finite. Raises ``ValueError`` without a sample.

        NaN or an infinity raises :class:`~osmosis_rollout.errors.NonFiniteRewardError`, a
        pydantic ``ValidationError`` as the official SDK's validated assignment raises.
        """
        if self.sample is None:
            raise ValueError("GraderContext has no sample to reward")
        if isinstance(reward, int | float) and not math.isfinite(reward):
            raise NonFiniteRewardError.for_reward(reward)
        self.sample.reward = reward
