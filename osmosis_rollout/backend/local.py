"""In-process execution: run the workflow and grader on this event loop, bounded by a limiter.

Semantics follow the official SDK 0.3.8 (the protocol's LocalBackend and outcome-table rules):

- one limiter slot is held for the workflow *and* the grader; time spent waiting for it
  comes out of the agent deadline (``budget = max(agent_timeout - queued, 0)``);
- the grader deadline is independent of the agent's;
- a result that arrives after its deadline (a swallowed cancellation, or sync code that
  blocked the loop) is still a ``timeout``;
- exceptions map to categories: ``TimeoutError`` -> timeout, ``ValueError``/``TypeError``/
  ``AssertionError`` -> validation_error, sandbox provider errors -> http_error, else agent_error.

Beyond the official backend: ``run``/``grade`` may be plain ``def`` (run in a worker thread
so they cannot stall other rollouts), and ``max_queue_depth`` bounds the queue so
``has_capacity()`` turns false and a server answers 429 instead of queueing without limit.
"""

from __future__ import annotations

import asyncio
import contextvars
import copy
import functools
import inspect
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from osmosis_rollout._internal.imports import resolve_reference
from osmosis_rollout._internal.limiter import ConcurrencyLimiter
from osmosis_rollout._internal.user_frames import user_error_fields
from osmosis_rollout.agent_workflow import AgentWorkflow
from osmosis_rollout.backend.base import ExecutionBackend
from osmosis_rollout.context import (
    AgentWorkflowContext,
    GraderContext,
    RolloutContext,
    get_rollout_context,
)
from osmosis_rollout.grader import Grader
from osmosis_rollout.runs.artifacts import create_rollout_artifacts_dir, default_artifact_root
from osmosis_rollout.types import (
    AgentWorkflowConfig,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    GraderConfig,
    RolloutErrorCategory,
    RolloutSample,
    RolloutStatus,
)
from osmosis_rollout.types.output import coerce_output

__all__ = ["DEFAULT_MAX_CONCURRENT", "LocalBackend"]

logger = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENT = 4
"""Slots when no workflow config is given (a config's ``None`` means unbounded)."""

UNBOUNDED_SYNC_WORKERS = 64
"""Worker threads for plain-``def`` user code when the limiter is unbounded."""

_SANDBOX_ERROR_TYPES = frozenset(
    {
        "SandboxConnectionException",
        "SandboxRateLimitException",
        "PoolStateStoreUnavailableException",
    }
)
_SANDBOX_API_ERROR_TYPES = frozenset({"SandboxApiException", "SandboxAPIError"})
_PROVIDER_HTTP_STATUSES = frozenset({401, 402, 403, 429, 500, 502, 503, 504})


def _cancelling() -> bool:
    """Whether this task is being cancelled by its caller (a deadline of ours that fired has
    already taken its own cancel back)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def categorize_exception(exc: BaseException) -> RolloutErrorCategory:
    """Map an exception raised by user code onto the wire's error categories."""
    if isinstance(exc, TimeoutError):
        return RolloutErrorCategory.TIMEOUT
    if isinstance(exc, ValueError | TypeError | AssertionError):
        return RolloutErrorCategory.VALIDATION_ERROR
    status_code = getattr(exc, "status_code", None)
    if not isinstance(status_code, int) or isinstance(status_code, bool):
        status_code = None
    for cls in type(exc).__mro__:
        if cls.__name__ in _SANDBOX_ERROR_TYPES:
            return RolloutErrorCategory.HTTP_ERROR
        if cls.__name__ in _SANDBOX_API_ERROR_TYPES and status_code in _PROVIDER_HTTP_STATUSES:
            return RolloutErrorCategory.HTTP_ERROR
    return RolloutErrorCategory.AGENT_ERROR


def deadline_message(phase: str, limit: float | None, queued_sec: float) -> str:
    """``"<phase> exceeded its <limit>s deadline"`` (+ queue time when it mattered)."""
    message = f"{phase} exceeded its {limit}s deadline"
    if queued_sec >= 0.1:
        message += f" ({queued_sec:.1f}s of it spent queued)"
    return message


def validate_graded_sample(sample: RolloutSample | None) -> None:
    """Raise ``ValueError`` unless the grader left a sample with a reward (or removed it)."""
    if sample is None:
        raise ValueError(
            "No sample to grade. The workflow must return messages or register a sample source "
            "(OsmosisMemorySession, OsmosisStrandsAgent, RolloutChatClient) before grading."
        )
    if not sample.remove_sample and sample.reward is None:
        raise ValueError("Sample has no reward after grading")


async def call_user_code(
    fn: Callable[..., Any], *args: Any, executor: Executor | None = None
) -> Any:
    """Await ``fn(*args)``; a plain function runs in a worker thread (context copied).

    ``executor`` picks the thread pool (``None``: the loop's default one). The calling
    task's context variables, the ambient ``RolloutContext`` included, are visible in
    the thread.
    """
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    loop = asyncio.get_running_loop()
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    result = await loop.run_in_executor(executor, call)
    return await result if inspect.isawaitable(result) else result


class _Deadline:
    """An ``asyncio.timeout`` (none without a budget) that also remembers when it started, to
    catch late returns."""

    def __init__(self, budget: float | None) -> None:
        self.budget = budget
        self.timeout = asyncio.timeout(budget)
        self.started = time.monotonic()

    def fired(self) -> bool:
        return self.timeout.expired()

    def overrun(self) -> bool:
        """True when the deadline fired or wall time passed the budget (loop was blocked)."""
        if self.budget is None:
            return False
        return self.fired() or time.monotonic() - self.started > self.budget


def _failure(
    phase: str,
    rollout_id: str,
    exc: BaseException,
    deadline: _Deadline,
    message_if_ours: str,
    sample: RolloutSample | None = None,
) -> ExecutionResult:
    """The result of user code that raised ``exc`` (called in its ``except`` block)."""
    if _cancelling():
        # The caller cancelled and user code turned that into an error of its own
        # (some frameworks do): the rollout was cancelled, and is reported so.
        raise asyncio.CancelledError(f"cancelled ({exc!r})") from exc
    ours = deadline.fired()
    logger.info("rollout %s: %s failed: %r", rollout_id, phase, exc, exc_info=not ours)
    extra: dict[str, Any] = {"phase": phase, "exception_type": type(exc).__name__}
    if not ours:
        extra.update(user_error_fields(exc))
    return ExecutionResult(
        status=RolloutStatus.FAILURE,
        sample=sample,
        err_message=message_if_ours if ours else (str(exc) or type(exc).__name__),
        err_category=RolloutErrorCategory.TIMEOUT if ours else categorize_exception(exc),
        extra_fields=extra,
    )


def _late(phase: str, message: str, sample: RolloutSample | None = None) -> ExecutionResult:
    """The result of user code that returned after its deadline (it blocked the loop)."""
    return ExecutionResult(
        status=RolloutStatus.FAILURE,
        sample=sample,
        err_message=message,
        err_category=RolloutErrorCategory.TIMEOUT,
        extra_fields={"phase": phase, "late_return": True},
    )


class LocalBackend(ExecutionBackend):
    """Run a workflow (and grader) in this process.

    ``workflow``/``grader`` and their configs may be classes/instances or ``"module:Attr"``
    strings. Slots: 4 without a workflow config, else ``config.concurrency.max_concurrent``
    (``None`` = unbounded). ``artifact_root`` defaults to ``$_OSMOSIS_ROLLOUT_ARTIFACT_ROOT``
    or ``~/.osmosis``, fixed at construction.
    """

    def __init__(
        self,
        *,
        workflow: type[AgentWorkflow[Any]] | str,
        workflow_config: AgentWorkflowConfig | str | None = None,
        grader: type[Grader] | str | None = None,
        grader_config: GraderConfig | str | None = None,
        max_queue_depth: int | None = None,
        artifact_root: str | Path | None = None,
    ) -> None:
        self.workflow_cls: type[AgentWorkflow[Any]] = resolve_reference(workflow)
        self.workflow_config: AgentWorkflowConfig | None = resolve_reference(workflow_config)
        self.grader_cls: type[Grader] | None = resolve_reference(grader) if grader else None
        self.grader_config: GraderConfig | None = (
            resolve_reference(grader_config) if grader_config else None
        )
        # None passes, as in the official backend (each rollout then fails); any other
        # non-workflow is refused now, which the official would only find per rollout.
        if self.workflow_cls is not None and not (
            isinstance(self.workflow_cls, type) and issubclass(self.workflow_cls, AgentWorkflow)
        ):
            raise TypeError(
                f"workflow must be an AgentWorkflow subclass, got {self.workflow_cls!r}"
            )
        if self.grader_cls is not None and not (
            isinstance(self.grader_cls, type) and issubclass(self.grader_cls, Grader)
        ):
            raise TypeError(f"grader must be a Grader subclass, got {self.grader_cls!r}")
        if max_queue_depth is not None and max_queue_depth < 0:
            raise ValueError(f"max_queue_depth must be >= 0 or None, got {max_queue_depth}")
        max_concurrent = (
            self.workflow_config.concurrency.max_concurrent
            if self.workflow_config is not None
            else DEFAULT_MAX_CONCURRENT
        )
        self.limiter = ConcurrencyLimiter(max_concurrent=max_concurrent)
        self.max_queue_depth = max_queue_depth
        self._reserved: set[str] = set()
        self.artifact_root = Path(artifact_root) if artifact_root else default_artifact_root()
        self._executor: ThreadPoolExecutor | None = None
        self._executor_workers = 0

    def _sync_executor(self) -> ThreadPoolExecutor:
        """The backend's own pool for plain-``def`` run/grade, as wide as the limiter's limit.

        The loop's default pool has ``min(32, cpus + 4)`` threads: 32 sync workflows would
        burn their deadlines waiting for one. A limit raised while serving (``--max-concurrent
        auto``) replaces the pool with a wider one (running calls finish on the old one's
        threads); it never narrows, the limiter bounds the calls.
        """
        workers = self.limiter.max_concurrent or UNBOUNDED_SYNC_WORKERS
        if self._executor is None or self._executor_workers < workers:
            previous = self._executor
            self._executor = ThreadPoolExecutor(
                max_workers=workers, thread_name_prefix="osmosis-rollout"
            )
            self._executor_workers = workers
            if previous is not None:
                previous.shutdown(wait=False)
        return self._executor

    async def shutdown(self) -> None:
        """Stop the worker threads of plain-``def`` user code (running calls finish on their own)."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    def reserve(self, rollout_id: str) -> None:
        """Count ``rollout_id`` as waiting from admission until :meth:`execute` starts."""
        self._reserved.add(rollout_id)

    def release(self, rollout_id: str) -> None:
        """Forget a reservation whose ``execute`` never ran (cancelled while queued)."""
        self._reserved.discard(rollout_id)

    @property
    def waiting(self) -> int:
        """Rollouts admitted but not holding a slot: reserved ones plus the limiter's queue."""
        return len(self._reserved) + self.limiter.queued

    def has_capacity(self) -> bool:
        """True unless ``max_queue_depth`` is set and one more rollout would wait beyond it.

        Counts rollouts admitted but not yet started (:meth:`reserve`), so a burst cannot
        slip past the bound before its rollouts reach the limiter.
        """
        if self.max_queue_depth is None or self.limiter.max_concurrent is None:
            return True
        free = self.limiter.max_concurrent - self.limiter.running
        return self.waiting < self.max_queue_depth + max(free, 0)

    def health(self) -> dict[str, Any]:
        """``{"status": "ok", "concurrency": {max_concurrent, queued, running}}``."""
        health: dict[str, Any] = {"status": "ok", "concurrency": self.limiter.snapshot()}
        if self.max_queue_depth is not None:
            health["max_queue_depth"] = self.max_queue_depth
        return health

    async def execute(self, request: ExecutionRequest) -> ExecutionOutcome:
        """Run :meth:`run_workflow`, then (when due) :meth:`run_grader`, in one limiter slot.

        Both go through the instance, so a subclass overriding either (as with the
        official backend) is what runs.
        """
        rollout_ctx = get_rollout_context()
        enqueued = time.monotonic()
        # From here the limiter counts this rollout (no await before it enters the queue).
        self._reserved.discard(request.id)
        async with self.limiter.acquire():
            queued_sec = time.monotonic() - enqueued
            if rollout_ctx is not None:
                await rollout_ctx.set_status(RolloutStatus.RUNNING)
            result = await self.run_workflow(request, queued_sec=queued_sec)
            if not request.grade or result.status is not RolloutStatus.SUCCESS:
                return ExecutionOutcome(workflow=result)
            if self.grader_cls is None or (request.label is None and request.metadata is None):
                return ExecutionOutcome(
                    workflow=result, grader=ExecutionResult(status=RolloutStatus.FAILURE)
                )
            if rollout_ctx is not None:
                await rollout_ctx.set_status(RolloutStatus.GRADING)
            graded = await self.run_grader(request, result)
            return ExecutionOutcome(workflow=result, grader=graded)

    async def run_workflow(
        self, request: ExecutionRequest, *, queued_sec: float = 0.0
    ) -> ExecutionResult:
        """Run the workflow once (the official signature); never raises for user code.

        ``queued_sec`` (time spent waiting for a slot) comes out of the agent deadline.
        Outside :meth:`execute` there is no ambient ``RolloutContext``, so a fresh one
        collects the sample.
        """
        rollout_ctx = get_rollout_context() or RolloutContext(rollout_id=request.id)
        artifacts_dir = await create_rollout_artifacts_dir(self.artifact_root, request.id)
        config = copy.deepcopy(self.workflow_config)
        ctx: AgentWorkflowContext[Any] = AgentWorkflowContext(
            prompt=request.prompt,
            config=config,
            metadata=request.metadata,
            artifacts_dir=artifacts_dir,
        )
        limit = request.agent_timeout_sec
        budget = max(limit - queued_sec, 0.0) if limit is not None else None
        deadline = _Deadline(budget)
        try:
            async with deadline.timeout:
                with rollout_ctx:
                    workflow = self.workflow_cls(config)
                    output = coerce_output(
                        await call_user_code(workflow.run, ctx, executor=self._sync_executor())
                    )
                    if output is None:
                        sample = await rollout_ctx.get_sample()
                    elif output.messages is None:
                        sample = None
                    else:
                        sample = RolloutSample(
                            messages=output.messages,
                            label=request.label,
                            metrics=dict(output.metrics),
                        )
        except Exception as exc:
            late = deadline_message("workflow", limit, queued_sec)
            return _failure("workflow", request.id, exc, deadline, late)
        if deadline.overrun():
            return _late("workflow", deadline_message("workflow", limit, queued_sec))
        return ExecutionResult(status=RolloutStatus.SUCCESS, sample=sample)

    async def run_grader(
        self, request: ExecutionRequest, result: ExecutionResult
    ) -> ExecutionResult:
        """Grade ``result``'s sample (the official signature); never raises for user code.

        Without a grader, ``result`` is returned unchanged, as in the official backend.
        """
        if self.grader_cls is None:
            return result
        # Called from execute, the workflow has just made (and proved writable) the folder:
        # finding it is one stat, making it again a mkdir and a write per rollout.
        made = os.path.join(self.artifact_root, request.id, "artifacts")
        artifacts_dir = (
            Path(made)
            if os.path.isdir(made)
            else await create_rollout_artifacts_dir(self.artifact_root, request.id)
        )
        ctx = GraderContext(
            label=request.label,
            sample=result.sample,
            metadata=request.metadata,
            artifacts_dir=artifacts_dir,
        )
        limit = request.grader_timeout_sec
        deadline = _Deadline(limit)
        try:
            async with deadline.timeout:
                grader = self.grader_cls(self.grader_config)
                await call_user_code(grader.grade, ctx, executor=self._sync_executor())
                validate_graded_sample(ctx.sample)
        except Exception as exc:
            late = deadline_message("grader", limit, 0.0)
            return _failure("grader", request.id, exc, deadline, late, sample=result.sample)
        if deadline.overrun():
            return _late("grader", deadline_message("grader", limit, 0.0), result.sample)
        return ExecutionResult(status=RolloutStatus.SUCCESS, sample=ctx.sample)
