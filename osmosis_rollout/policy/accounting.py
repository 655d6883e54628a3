"""Per-rollout accounting of policy calls: the request/response log, tokens, latency and cost.

Cost comes from one of two places. Configured prices (:class:`TokenPrices`, dollars per
million prompt and completion tokens) win when given: the user knows their rates. Otherwise
the cost the provider reported through LiteLLM is summed over the calls that reported one:
LiteLLM prices a call it made itself, and :func:`litellm_cost` prices a call made without
it (an OpenAI-compatible server reached through the ``openai`` SDK) from the same cost map.
A cost computed from estimated token counts (a policy that reported no usage) is marked
``estimated``.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from osmosis_rollout.policy.types import Usage

__all__ = ["CallRecord", "Cost", "RolloutCallLog", "TokenPrices", "litellm_cost"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenPrices:
    """Prices in US dollars per million tokens: ``input`` for prompt, ``output`` for completion."""

    input_per_million: float
    output_per_million: float

    def __post_init__(self) -> None:
        for name in ("input_per_million", "output_per_million"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{name} must be a number of dollars, got {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """What ``prompt_tokens`` in and ``completion_tokens`` out cost at these prices."""
        return (
            prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million
        ) / 1_000_000


@dataclass(frozen=True)
class Cost:
    """A rollout's cost in US dollars, where it came from, and whether its tokens were estimated."""

    usd: float
    source: Literal["prices", "provider"]
    estimated: bool = False


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
    where: str | None = None
    """The user's frame a failed call raised in (a scripted policy's ``policy.py:7 in
    policy``), when it raised in user code."""
    traceback: str | None = None
    """The failed call's short traceback (user frames only; see
    :mod:`osmosis_rollout._internal.user_frames`)."""


@dataclass
class RolloutCallLog:
    """Everything the endpoint served one rollout, in call order."""

    rollout_id: str
    calls: list[CallRecord] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False
    reported_cost: float | None = None
    """The sum of the costs the provider reported (None when no call reported one)."""

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
            if record.usage.cost is not None:
                self.reported_cost = (self.reported_cost or 0.0) + record.usage.cost

    def cost(self, prices: TokenPrices | None = None) -> Cost | None:
        """The rollout's cost: at ``prices`` when given, else as the provider reported it.

        None when neither is known (a scripted policy and no prices).
        """
        if prices is not None:
            return Cost(
                prices.cost(self.prompt_tokens, self.completion_tokens),
                "prices",
                estimated=self.tokens_estimated,
            )
        if self.reported_cost is not None:
            return Cost(self.reported_cost, "provider")
        return None

    def copy(self) -> RolloutCallLog:
        """A snapshot that later calls will not change."""
        return dataclasses.replace(self, calls=list(self.calls))

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
            "reported_cost": self.reported_cost,
            "latency_s": self.latency_s,
        }


def litellm_cost(
    provider: str, model: str, prompt_tokens: int, completion_tokens: int
) -> float | None:
    """What LiteLLM's cost map says ``model`` of ``provider`` costs for these tokens, in US
    dollars; None when the map does not know the model (or LiteLLM is not installed)."""
    from osmosis_rollout.errors import MissingExtraError
    from osmosis_rollout.integrations._litellm import import_litellm

    try:
        litellm = import_litellm()
    except MissingExtraError:
        return None
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model,
            custom_llm_provider=provider,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
        cost = float(prompt_cost) + float(completion_cost)
    except Exception as exc:  # LiteLLM raises a plain Exception for a model it cannot price
        logger.debug("LiteLLM's cost map has no price for %s/%s: %s", provider, model, exc)
        return None
    return cost if math.isfinite(cost) else None
