"""How one attempt of one row runs: in-process through LocalBackend, or against rollout servers.

Both modes serve the model through one loopback :class:`~osmosis_rollout.controller.PolicyServer`
and end in the same :class:`~osmosis_rollout.runs.report_model.AttemptRecord` (read straight
from an in-process result, or from the wire result a server sent): nothing after cares which.
"""

from __future__ import annotations

import abc
import asyncio
import copy
import dataclasses
import itertools
import json
import os
import re
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from osmosis_rollout import ExecutionBackend, ExecutionRequest, RolloutContext, sample_text
from osmosis_rollout.context import RolloutProgress
from osmosis_rollout.execution import ExecutedRollout, execute_in_process
from osmosis_rollout.runs.report_model import AttemptRecord, GraderSaid
from osmosis_rollout.transport.wire import replace_surrogates
from osmosis_rollout.types import RolloutStatus
from pytest_osmosis.results.verdict import classify
from pytest_osmosis.run.rollout_log import rollout_output

if TYPE_CHECKING:
    from osmosis_rollout.controller import PolicyServer, RolloutClient
    from osmosis_rollout.dataset import DatasetRow
    from osmosis_rollout.policy import TokenPrices
    from osmosis_rollout.trajectory.save import WriteFailureCallback
    from pytest_osmosis.run.rollout_servers import ServedServer

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

MAX_ANSWER_CHARS = 1000
MAX_ERROR_CHARS = 4000
MAX_TOOL_CALLS = 20
MAX_TOOL_ARGUMENT_CHARS = 200
"""Per-row records travel on every test report and stay in memory for the session, so the
answer and error text they carry are clipped; the trajectory file has everything."""


def _clip(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[: limit - 20] + f"... [{len(text) - limit + 20} more chars]"


def make_rollout_id(row_key: str, attempt: int) -> str:
    """A readable, unique, single-path-segment id: ``<row key>.<attempt>.<8 hex>``."""
    safe = _UNSAFE.sub("_", row_key).strip("._") or "row"
    # 8 random hex digits, as the first 8 of a uuid4 are, without building the UUID.
    return f"{safe[:80]}.{attempt}.{os.urandom(4).hex()}"


def _read_sample(read: Any, messages: Any) -> Any:
    """``read(messages)`` of a sample in chat, OpenAI Agents or Strands shape; None when it
    reads nothing (or cannot read that shape)."""
    try:
        return read(messages or []) or None
    except Exception:
        return None


def _tool_call_lines(messages: Any) -> list[str] | None:
    """The sample's tool calls, one ``name({arguments})`` line each (arguments clipped, at
    most :data:`MAX_TOOL_CALLS` lines), or None when it made none."""
    calls = _read_sample(sample_text.tool_calls, messages)
    if not calls:
        return None
    lines = [
        f"{call['name']}("
        f"{_clip(json.dumps(call['arguments'], ensure_ascii=False, default=str), MAX_TOOL_ARGUMENT_CHARS)})"
        for call in calls[:MAX_TOOL_CALLS]
    ]
    if len(calls) > MAX_TOOL_CALLS:
        lines.append(f"... {len(calls) - MAX_TOOL_CALLS} more calls")
    return lines


@dataclass(frozen=True)
class Ended:
    """How a rollout ended, as either mode sees it (an in-process result or the wire's), and
    what it left behind."""

    status: str
    reward: float | None = None
    remove_sample: bool = False
    err_category: str | None = None
    err_message: str | None = None
    messages: Any = None
    metrics: Any = None
    notes: dict[str, str] | None = None
    """What a server of ours sends beyond the official result (an in-process rollout, the
    same): the grader's reason, and the phase, user frame and short traceback of a failure."""
    trajectory: Path | None = None
    diagnostics: str | None = None
    workflow_log: str | None = None
    printed: str | None = None
    ungraded: str = "not_graded"
    """Why it has no reward, should it run without one (a server's grader is not ours to see)."""

    @classmethod
    def of_executed(cls, executed: ExecutedRollout, **left: Any) -> Ended:
        """An in-process rollout's result and notes, read as they are (nothing encoded)."""
        result = executed.result
        sample = result.sample
        category = result.err_category
        return cls(
            status=RolloutStatus(result.status).value,
            reward=sample.reward if sample is not None else None,
            remove_sample=bool(sample is not None and sample.remove_sample),
            err_category=None if category is None else str(getattr(category, "value", category)),
            err_message=result.err_message and replace_surrogates(result.err_message),
            messages=sample.messages if sample is not None else None,
            metrics=sample.metrics if sample is not None else None,
            notes=executed.wire_notes(),
            trajectory=executed.trajectory,
            diagnostics=str(executed.diagnostics) if executed.diagnostics else None,
            workflow_log=(executed.notes.workflow_log() or None) if executed.notes else None,
            **left,
        )

    @classmethod
    def of_wire(cls, wire: dict[str, Any]) -> Ended:
        """A rollout server's ``RolloutResultResponse`` JSON object."""
        sample = wire.get("sample") or {}
        return cls(
            status=str(wire.get("status")),
            reward=sample.get("reward"),
            remove_sample=bool(sample.get("remove_sample")),
            err_category=wire.get("err_category"),
            err_message=wire.get("err_message"),
            messages=sample.get("messages"),
            metrics=sample.get("metrics"),
            notes=wire.get("notes") if isinstance(wire.get("notes"), dict) else None,
        )


@dataclass(kw_only=True)
class AttemptRunner(abc.ABC):
    """Runs one attempt of one row to its classified result: binds it to the policy
    endpoint, runs it (each mode its own way: :meth:`_run`) and classifies how it ended."""

    policy_server: PolicyServer
    rollouts: Path
    """Where each rollout writes: ``<rollouts>/<rollout_id>/{trajectory.json,artifacts/}``."""
    agent_timeout: float | None
    grader_timeout: float | None
    prices: TokenPrices | None = None
    """Configured token prices; without them, the cost the provider reported (if any)."""

    @abc.abstractmethod
    async def _run(self, row: DatasetRow, attempt: int, rollout_id: str, key: str) -> Ended:
        """Run the attempt bound as ``rollout_id`` (its policy key: ``key``): how it ended."""

    async def run_attempt(
        self, row: DatasetRow, attempt: int, *, cassette_key: str
    ) -> AttemptRecord:
        """Run attempt ``attempt`` of ``row``; ``cassette_key`` keys its recorded model traffic."""
        rollout_id = make_rollout_id(row.key, attempt)
        key = self.policy_server.bind(
            rollout_id, row=row.raw, row_key=cassette_key, attempt=attempt
        )
        started = time.perf_counter()
        ended = await self._run(row, attempt, rollout_id, key)
        log = self.policy_server.release(rollout_id)
        duration = time.perf_counter() - started
        status, reward, error_type = classify(
            ended.status, ended.reward, ended.remove_sample, ended.err_category, ended.err_message
        )
        failed = status == "failed"
        err_message = ended.err_message
        told = ended.notes or {}
        phase, where, traceback = told.get("phase"), told.get("where"), told.get("traceback")
        call = next((c for c in reversed(log.calls) if c.error), None)
        if failed and call is not None:
            # The model call failed in the policy (a replay miss, a provider error): that is
            # the cause worth showing, not the framework's wrapper exception.
            err_message = str(call.error)
            miss = err_message.startswith("CassetteMissError")
            error_type = "cassette_miss" if miss else "policy_error"
            where, traceback, phase = call.where, call.traceback, "policy"
        cost = log.cost(self.prices)
        reason, metrics = told.get("grader_reason"), ended.metrics
        grader = None
        if reason or metrics:
            grader = GraderSaid(
                reason=reason or None, metrics=metrics if isinstance(metrics, dict) else {}
            )
        prompt = _read_sample(sample_text.first_user_text, row.initial_messages) if failed else None
        return AttemptRecord(
            row_key=row.key,
            row_index=row.index,
            source_row_index=row.source_index,
            run_index=attempt,
            rollout_id=rollout_id,
            status=status,
            reward=reward,
            error_type=error_type,
            err_message=_clip(err_message, MAX_ERROR_CHARS),
            tokens=log.total_tokens,
            tokens_estimated=log.tokens_estimated,
            cost_usd=None if cost is None else cost.usd,
            cost_estimated=cost is not None and cost.estimated,
            duration_ms=round(duration * 1000.0, 3),
            started_at=round(time.time() - duration, 6),
            trajectory_filename=str(ended.trajectory) if ended.trajectory else None,
            diagnostics_path=ended.diagnostics,
            last_assistant=_clip(
                _read_sample(sample_text.last_assistant_text, ended.messages), MAX_ANSWER_CHARS
            ),
            tool_calls=_tool_call_lines(ended.messages),
            policy_calls=len(log.calls),
            error_phase=phase if failed else None,
            error_where=where if failed else None,
            error_traceback=_clip(traceback, MAX_ERROR_CHARS) if failed else None,
            grader=grader,
            # Kept until the verdict: a row that passes lets it go (decide_row).
            workflow_log=ended.workflow_log,
            prompt=_clip(prompt, MAX_ANSWER_CHARS),
            printed=ended.printed,
            ungraded=ended.ungraded if status == "success" and reward is None else None,
        )


@dataclass(kw_only=True)
class InProcessRunner(AttemptRunner):
    """Runs the workflow through an :class:`ExecutionBackend` on the scheduler's loop."""

    backend: ExecutionBackend
    on_write_failure: WriteFailureCallback | None = None
    """Told of a trajectory file that could not be written (the run stops on it)."""

    async def _run(self, row: DatasetRow, attempt: int, rollout_id: str, key: str) -> Ended:
        request = ExecutionRequest(
            id=rollout_id,
            prompt=copy.deepcopy(row.initial_messages),
            label=row.label,
            metadata=copy.deepcopy(row.metadata),
            agent_timeout_sec=self.agent_timeout,
            grader_timeout_sec=self.grader_timeout,
        )
        context = RolloutContext(
            chat_completions_url=self.policy_server.rollout_url(rollout_id),
            api_key=key,
            rollout_id=rollout_id,
            progress=RolloutProgress(),
            # Our endpoint answers plain requests too: in-process rollouts skip the cost of
            # streaming (samples are identical); server mode keeps the production path.
            streaming=False,
        )
        with rollout_output(rollout_id) as printed:
            executed = await execute_in_process(
                self.backend,
                request,
                context,
                trajectory_root=self.rollouts,
                on_write_failure=self.on_write_failure,
            )
        # Why a rollout that ran has no reward (see ``AttemptRecord.ungraded``).
        if getattr(self.backend, "grader_cls", "unknown") is None:
            ungraded = "no_grader"
        elif row.label is None and row.metadata is None:
            ungraded = "no_label"
        else:
            ungraded = "not_graded"
        return Ended.of_executed(executed, printed=printed.text() or None, ungraded=ungraded)


@dataclass(kw_only=True)
class ServerRunner(AttemptRunner):
    """Plays the controller: admits each attempt to a rollout server (round-robin) and
    long-polls its result. The report points at the trajectories of the server
    ``--osmosis-serve`` started (``served``), and an attempt on it fails once it is gone."""

    clients: list[RolloutClient]
    served: ServedServer | None = None

    def __post_init__(self) -> None:
        self._turns = itertools.cycle(self.clients)

    async def _run(self, row: DatasetRow, attempt: int, rollout_id: str, key: str) -> Ended:
        client = next(self._turns)
        admitted = self._admit_and_poll(client, row, attempt, rollout_id, key)
        if self.served is not None and client.url == self.served.url:
            ended = await _unless_it_died(self.served, admitted)
        else:
            ended = await admitted
        trajectory = self.rollouts / rollout_id / "trajectory.json"
        diagnostics = trajectory.with_name("diagnostics.json")
        return dataclasses.replace(
            ended,
            trajectory=trajectory if self.served is not None and trajectory.exists() else None,
            diagnostics=str(diagnostics) if diagnostics.is_file() else None,
        )

    async def _admit_and_poll(
        self, client: RolloutClient, row: DatasetRow, attempt: int, rollout_id: str, key: str
    ) -> Ended:
        """Admit the attempt, long-poll its result; how it ended (failed on any error)."""
        from osmosis_rollout.errors import RolloutProtocolError

        try:
            handle = await client.run_rollout_async(
                initial_messages=copy.deepcopy(row.initial_messages),
                chat_completions_url=self.policy_server.rollout_url(rollout_id),
                rollout_id=rollout_id,
                llm_api_key=key,
                label=row.label,
                metadata=row.metadata or None,
                grade=True,
                agent_timeout_sec=self.agent_timeout,
                grader_timeout_sec=self.grader_timeout,
                extra_fields={"row_index": row.index, "run_index": attempt},
            )
            response = await handle
            return Ended.of_wire(response.model_dump(mode="json"))
        except RolloutProtocolError as exc:
            return Ended("failure", err_category="rollout_protocol_error", err_message=str(exc))
        except Exception as exc:
            message = str(exc) or type(exc).__name__
            if client.url not in message:
                # httpx's "All connection attempts failed" says nothing of which server.
                message += f" (rollout server {client.url})"
            return Ended("failure", err_category=type(exc).__name__, err_message=message)


async def _unless_it_died(served: ServedServer, attempt: Coroutine[Any, Any, Ended]) -> Ended:
    """How ``attempt`` ended, or a failure naming the cause once ``served`` has died."""
    if served.exit_cause() is None:
        work = asyncio.ensure_future(attempt)
        death = asyncio.ensure_future(served.exited())
        try:
            await asyncio.wait({work, death}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            death.cancel()
            if not work.done():
                work.cancel()
                await asyncio.gather(work, return_exceptions=True)
        if not work.cancelled():
            ended = work.result()
            # A failure while the server died (a refused poll) is the death's, not the row's.
            if ended.status == "success" or served.exit_cause() is None:
                return ended
    else:
        attempt.close()  # never started: nothing was admitted to a dead server
    cause = served.exit_cause() or "the --osmosis-serve rollout server exited"
    return Ended("failure", err_category="server_exited", err_message=cause)
