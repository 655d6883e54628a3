"""The execution backend contract that the rollout server and the plugin drive."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from osmosis_rollout.types import ExecutionOutcome, ExecutionRequest, RolloutStatus


class ExecutionBackend(ABC):
    """Runs rollouts. Only :meth:`execute` is required; the other hooks have safe defaults."""

    @abstractmethod
    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        """Run one rollout to its outcome. Cancellation of the calling task cancels it."""

    def has_capacity(self) -> bool:
        """False makes the server answer admission with 429."""
        return True

    def reserve(self, rollout_id: str) -> None:  # noqa: B027 - an optional hook
        """Count an admitted rollout before :meth:`execute` runs.

        The server calls it at admission, before the execution task exists, so that a
        burst admitted in one go counts against :meth:`has_capacity` at once.
        """

    def release(self, rollout_id: str) -> None:  # noqa: B027 - an optional hook
        """Drop the reservation of a rollout whose execution ended (or never started)."""

    def rollout_status(self, rollout_id: str) -> RolloutStatus | None:
        """The backend's own view of a rollout, if it keeps one (used by cancel)."""
        return None

    def cancel_rollouts(
        self,
        ids: Sequence[str] | None = None,
        prefix: str | None = None,
        all: bool = False,  # named as the wire field
    ) -> dict[str, str]:
        """Cancel rollouts the backend owns; ``{}`` lets the server cancel its own task.

        A plain method with positional selectors, as in the official SDK; the server also
        awaits an override written ``async def``.
        """
        return {}

    def health(self) -> dict[str, Any]:
        """Backend fields merged into ``GET /health``."""
        return {"status": "ok"}

    async def shutdown(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Release backend resources after the server drained."""
