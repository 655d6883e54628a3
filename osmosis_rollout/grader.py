"""The grader contract: a sample and the row's label in, one reward out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from osmosis_rollout.context import GraderContext
from osmosis_rollout.types import GraderConfig


class Grader(ABC):
    """Subclass and implement :meth:`grade`, calling ``ctx.set_reward(x)``.

    ``grade`` may be ``async def`` or a plain ``def`` (run in a worker thread). Its return
    value is ignored; set ``ctx.sample.remove_sample = True`` to drop the sample instead.
    """

    def __init__(self, config: GraderConfig | None = None) -> None:
        self.config = config

    @abstractmethod
    def grade(self, ctx: GraderContext) -> Any:
        """Grade ``ctx.sample`` against ``ctx.label`` / ``ctx.metadata``."""
        raise NotImplementedError
