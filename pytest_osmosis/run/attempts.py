"""How one attempt of one row runs: in-process through LocalBackend, or against rollout servers.

Both runners serve the model through one :class:`~osmosis_rollout.controller.PolicyServer`
on loopback, so a rollout never knows which policy answers it, and both produce the same
:class:`~osmosis_rollout.runs.report_model.AttemptRecord`, so items, summary and report do
not care which mode ran. An in-process result becomes the record directly; server mode reads
the wire result the server sent.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import os
import re
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from osmosis_rollout import ExecutionBackend, ExecutionRequest, RolloutContext, sample_text
from osmosis_rollout.context import RolloutProgress
from osmosis_rollout.execution import execute_in_process
from osmosis_rollout.runs.report_model import AttemptRecord, GraderSaid
from osmosis_rollout.transport.wire import replace_surrogates
from osmosis_rollout.types import ExecutionResult, RolloutStatus
from pytest_osmosis.results.verdict import classify
from pytest_osmosis.run.rollout_log import rollout_output

if TYPE_CHECKING:
    from osmosis_rollout.controller import PolicyServer, RolloutClient
    from osmosis_rollout.dataset import DatasetRow
    from osmosis_rollout.policy import TokenPrices
    from osmosis_rollout.rollout_notes import RolloutNotes
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


class AttemptRunner(Protocol):
    """Runs one attempt of one row to its classified result."""

    async def run_attempt(
        self, row: DatasetRow, attempt: int, *, cassette_key: str
    ) -> AttemptRecord: ...


@dataclass
class RunPaths:
    """Where one run writes: ``<output>/rollouts/<rollout_id>/{trajectory.json,artifacts/}``."""

    output: Path

    @property
    def rollouts(self) -> Path:
        return self.output / "rollouts"


def last_assistant_text(messages: Any) -> str | None:
    """The last assistant text of a sample in chat, OpenAI Agents or Strands shape."""
    try:
        text = sample_text.last_assistant_text(messages or [])
    except Exception:
        return None
    return text or None


def tool_call_lines(messages: Any) -> list[str] | None:
    """The sample's tool calls, one ``name({arguments})`` line each (arguments clipped, at
    most :data:`MAX_TOOL_CALLS` lines), or None when it made none."""
    try:
        calls = sample_text.tool_calls(messages or [])
    except Exception:
        return None
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
    """How a rollout ended, as either mode sees it (an in-process result or the wire's)."""

    status: str
    """The wire status: ``success``, ``failure``, ..."""
    reward: float | None = None
    remove_sample: bool = False
    err_category: str | None = None
    err_message: str | None = None
    messages: Any = None
    metrics: Any = None

    @classmethod
    def of_result(cls, result: ExecutionResult) -> Ended:
        """An in-process backend's result, read as it is (nothing encoded)."""
        sample = result.sample
        category = result.err_category
        return cls(
            status=RolloutStatus(result.status).value,
            reward=sample.reward if sample is not None else None,
            remove_sample=bool(sample is not None and sample.remove_sample),
            err_category=None if category is None else str(getattr(category, "value", category)),
            err_message=None
            if result.err_message is None
            else replace_surrogates(result.err_message),
            messages=sample.messages if sample is not None else None,
            metrics=sample.metrics if sample is not None else None,
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
        )


class _AttemptBuilder:
    """Shared tail of both runners: classify how the rollout ended and attach the call log."""

    prices: TokenPrices | None = None
    """Configured token prices; without them, the cost the provider reported (if any)."""

    def __init__(self, policy_server: PolicyServer, paths: RunPaths) -> None:
        self.policy_server = policy_server
        self.paths = paths

    def begin(self, row: DatasetRow, attempt: int, cassette_key: str) -> tuple[str, str]:
        """Bind a new attempt to the policy endpoint: its rollout id and its own key."""
        rollout_id = make_rollout_id(row.key, attempt)
        key = self.policy_server.bind(
            rollout_id, row=row.raw, row_key=cassette_key, attempt=attempt
        )
        return rollout_id, key

    def finish(
        self,
        row: DatasetRow,
        attempt: int,
        rollout_id: str,
        ended: Ended,
        started: float,
        trajectory: Path | None,
        *,
        diagnostics: str | None,
        phase: str | None = None,
        notes: RolloutNotes | None = None,
    ) -> AttemptRecord:
        log = self.policy_server.release(rollout_id)
        duration = time.perf_counter() - started
        status, reward, error_type = classify(
            ended.status, ended.reward, ended.remove_sample, ended.err_category, ended.err_message
        )
        err_message = ended.err_message
        miss = _policy_error(log)
        if status == "failed" and miss is not None:
            # The model call failed in the policy (a replay miss, a provider error): that is
            # the cause worth showing, not the framework's wrapper exception.
            error_type, err_message = miss
            phase = None
        cost = log.cost(self.prices)
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
            tokens=getattr(log, "total_tokens", None),
            tokens_estimated=bool(getattr(log, "tokens_estimated", False)),
            cost_usd=None if cost is None else cost.usd,
            cost_estimated=cost is not None and cost.estimated,
            duration_ms=round(duration * 1000.0, 3),
            started_at=round(time.time() - duration, 6),
            trajectory_filename=str(trajectory) if trajectory else None,
            diagnostics_path=diagnostics,
            last_assistant=_clip(last_assistant_text(ended.messages), MAX_ANSWER_CHARS),
            tool_calls=tool_call_lines(ended.messages),
            policy_calls=len(getattr(log, "calls", []) or []),
            error_phase=phase if status == "failed" else None,
            grader=_grader_said(notes, ended.metrics),
            workflow_log=(notes.workflow_log() or None) if notes and status == "failed" else None,
            prompt=_clip(_prompt_text(row), MAX_ANSWER_CHARS) if status == "failed" else None,
        )


def _grader_said(notes: RolloutNotes | None, metrics: Any) -> GraderSaid | None:
    """The attempt's ``grader`` entry: the grader's reason and the sample's metrics, if any."""
    reason = notes.grader_reason() if notes is not None else ""
    if not reason and not metrics:
        return None
    return GraderSaid(reason=reason or None, metrics=metrics if isinstance(metrics, dict) else {})


def _why_ungraded(backend: ExecutionBackend, row: DatasetRow) -> str:
    """Why an in-process rollout that ran has no reward (see ``AttemptRecord.ungraded``)."""
    if getattr(backend, "grader_cls", "unknown") is None:
        return "no_grader"
    if row.label is None and row.metadata is None:
        return "no_label"
    return "not_graded"


def _prompt_text(row: DatasetRow) -> str | None:
    """The row's first user message's text, or None."""
    try:
        return sample_text.first_user_text(row.initial_messages) or None
    except Exception:
        return None


def _existing(path: Path) -> str | None:
    return str(path) if path.is_file() else None


def _policy_error(log: Any) -> tuple[str, str] | None:
    """The last failed model call of a rollout, as ``(error_type, message)``."""
    for call in reversed(getattr(log, "calls", []) or []):
        error = getattr(call, "error", None)
        if error:
            kind = "cassette_miss" if str(error).startswith("CassetteMissError") else "policy_error"
            return kind, str(error)
    return None


class InProcessRunner(_AttemptBuilder):
    """Runs the workflow through an :class:`ExecutionBackend` on the scheduler's loop."""

    def __init__(
        self,
        backend: ExecutionBackend,
        policy_server: PolicyServer,
        paths: RunPaths,
        *,
        agent_timeout: float | None,
        grader_timeout: float | None,
        on_write_failure: WriteFailureCallback | None = None,
    ) -> None:
        super().__init__(policy_server, paths)
        self.backend = backend
        self.on_write_failure = on_write_failure
        """Told of a trajectory file that could not be written (the run stops on it)."""
        self._trajectory_root = paths.rollouts  # a Path built once, not per row
        self.agent_timeout = agent_timeout
        self.grader_timeout = grader_timeout

    async def run_attempt(
        self, row: DatasetRow, attempt: int, *, cassette_key: str
    ) -> AttemptRecord:
        rollout_id, key = self.begin(row, attempt, cassette_key)
        started = time.perf_counter()
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
                trajectory_root=self._trajectory_root,
                on_write_failure=self.on_write_failure,
            )
        result = self.finish(
            row,
            attempt,
            rollout_id,
            Ended.of_result(executed.result),
            started,
            executed.trajectory,
            diagnostics=str(executed.diagnostics) if executed.diagnostics else None,
            phase=executed.phase,
            notes=executed.notes,
        )
        if result.status == "success" and result.reward is None:
            result.ungraded = _why_ungraded(self.backend, row)
        result.printed = printed.text() or None
        return result


class ServerRunner(_AttemptBuilder):
    """Plays the controller: admits each attempt to a rollout server and long-polls its result.

    Several servers spread attempts round-robin. Trajectories are the server's business
    (it writes them under its own artifact root); the report points at them when the
    server shares this machine's filesystem and wrote one. An attempt on the server that
    ``--osmosis-serve`` started (``served``) fails at once, with its cause, when that
    server's process is gone.
    """

    def __init__(
        self,
        clients: list[RolloutClient],
        policy_server: PolicyServer,
        paths: RunPaths,
        *,
        agent_timeout: float | None,
        grader_timeout: float | None,
        server_artifact_root: Path | None = None,
        served: ServedServer | None = None,
    ) -> None:
        super().__init__(policy_server, paths)
        self.served = served
        self.clients = clients
        self._next = itertools.cycle(range(len(clients)))
        self.agent_timeout = agent_timeout
        self.grader_timeout = grader_timeout
        self.server_artifact_root = server_artifact_root

    async def run_attempt(
        self, row: DatasetRow, attempt: int, *, cassette_key: str
    ) -> AttemptRecord:
        rollout_id, key = self.begin(row, attempt, cassette_key)
        started = time.perf_counter()
        client = self.clients[next(self._next)]
        served = self.served if self.served is not None and client.url == self.served.url else None
        if served is None:
            wire = await self._admit_and_poll(client, row, attempt, rollout_id, key)
        else:
            wire = await _unless_it_died(
                served, rollout_id, self._admit_and_poll(client, row, attempt, rollout_id, key)
            )
        trajectory = None
        if self.server_artifact_root is not None:
            candidate = self.server_artifact_root / rollout_id / "trajectory.json"
            trajectory = candidate if candidate.exists() else None
        diagnostics = _existing(self.paths.rollouts / rollout_id / "diagnostics.json")
        result = self.finish(
            row,
            attempt,
            rollout_id,
            Ended.of_wire(wire),
            started,
            trajectory,
            diagnostics=diagnostics,
        )
        if result.status == "success" and result.reward is None:
            result.ungraded = "not_graded"  # the server's grader is not ours to see
        return result

    async def _admit_and_poll(
        self, client: RolloutClient, row: DatasetRow, attempt: int, rollout_id: str, key: str
    ) -> dict[str, Any]:
        """Admit the attempt, long-poll its result; the wire result (failed on any error)."""
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
            wire: dict[str, Any] = response.model_dump(mode="json")
        except RolloutProtocolError as exc:
            wire = _failed_wire(rollout_id, "rollout_protocol_error", str(exc))
        except Exception as exc:
            wire = _failed_wire(rollout_id, type(exc).__name__, str(exc) or type(exc).__name__)
        return wire


async def _unless_it_died(
    served: ServedServer, rollout_id: str, attempt: Coroutine[Any, Any, dict[str, Any]]
) -> dict[str, Any]:
    """``attempt``'s wire result, or a failure naming the cause once ``served`` has died."""
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
            wire = work.result()
            # A failure while the server died (a refused poll) is the death's, not the row's.
            if wire.get("status") == "success" or served.exit_cause() is None:
                return wire
    else:
        attempt.close()  # never started: nothing was admitted to a dead server
    cause = served.exit_cause() or "the --osmosis-serve rollout server exited"
    return _failed_wire(rollout_id, "server_exited", cause)


def _failed_wire(rollout_id: str, category: str, message: str) -> dict[str, Any]:
    return {
        "rollout_id": rollout_id,
        "status": "failure",
        "sample": None,
        "err_category": category,
        "err_message": message,
    }
