"""Per-rollout accounting of policy calls: the request/response log, tokens and latency."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from osmosis_rollout.policy.types import Usage

__all__ = ["CallRecord", "RolloutCallLog"]


@dataclass
class CallRecord:
    """One chat-completions call: the body the client sent and what it got back.

    ``reply`` is the :meth:`ChatReply.to_dict` form (None when the call failed); ``error`` is
    the message the client saw when it failed; ``status_code`` is the HTTP status sent (200
    for streams, whose errors travel in-band).
    """

    request: dict[str, Any]
    reply: dict[str, Any] | None
    latency_s: float
    error: str | None = None
    stream: bool = False
    status_code: int = 200
    usage: Usage | None = None


@dataclass
class RolloutCallLog:
    """Everything the endpoint served one rollout, in call order."""

    rollout_id: str
    calls: list[CallRecord] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens over all calls."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def n_calls(self) -> int:
        """How many calls the rollout made (failed ones included)."""
        return len(self.calls)

    @property
    def n_errors(self) -> int:
        """How many calls failed."""
        return sum(1 for call in self.calls if call.error is not None)

    @property
    def latency_s(self) -> float:
        """Total time the endpoint spent answering this rollout."""
        return sum(call.latency_s for call in self.calls)

    def add(self, record: CallRecord) -> None:
        """Append ``record`` and count its tokens."""
        self.calls.append(record)
        if record.usage is not None:
            self.prompt_tokens += record.usage.prompt_tokens
            self.completion_tokens += record.usage.completion_tokens
            self.tokens_estimated = self.tokens_estimated or record.usage.estimated

    def copy(self) -> RolloutCallLog:
        """A snapshot that later calls will not change."""
        return RolloutCallLog(
            rollout_id=self.rollout_id,
            calls=list(self.calls),
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            tokens_estimated=self.tokens_estimated,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (token totals and call count; not the bodies)."""
        return {
            "rollout_id": self.rollout_id,
            "calls": self.n_calls,
            "errors": self.n_errors,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "tokens_estimated": self.tokens_estimated,
            "latency_s": self.latency_s,
        }
