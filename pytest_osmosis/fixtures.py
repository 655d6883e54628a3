"""The ``osmosis_run`` fixture's rollout and the ``osmosis_dataset`` marker, for users' tests.

The fixtures are declared in ``plugin.py``; the marker's rows run ahead of time on the plugin's
scheduler, like ``--osmosis-dataset`` rows, and reach the test as ``osmosis_result``.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from osmosis_rollout import ExecutionResult, RolloutSample
    from osmosis_rollout.dataset import DatasetRow
    from pytest_osmosis.run.scheduler import RolloutScheduler

RUN_TIMEOUT_SEC = 600.0


@dataclass(frozen=True)
class DatasetMarker:
    """The keyword arguments of ``@pytest.mark.osmosis_dataset``; a typo fails loudly."""

    path: str
    rows: str | None = None

    @classmethod
    def from_mark(cls, mark: pytest.Mark, where: str) -> DatasetMarker:
        """Parse ``mark``; ``where`` (the test's node id) starts every error."""
        args, kwargs = list(mark.args), dict(mark.kwargs)
        if args and "path" in kwargs:
            raise pytest.UsageError(f"{where}: osmosis_dataset got path twice")
        kwargs.update(zip(("path", "rows"), args, strict=False))
        if len(args) > 2:
            raise pytest.UsageError(
                f"{where}: osmosis_dataset takes (path, rows=None), got extra {args[2:]!r}"
            )
        unknown = set(kwargs) - {"path", "rows"}
        if unknown:
            raise pytest.UsageError(
                f"{where}: osmosis_dataset got unknown argument(s) {', '.join(sorted(unknown))}; "
                "valid: path, rows"
            )
        if "path" not in kwargs:
            raise pytest.UsageError(f"{where}: osmosis_dataset needs a dataset path")
        rows = kwargs.get("rows")
        if rows is not None and not isinstance(rows, str):
            rows = ",".join(str(r) for r in rows) if isinstance(rows, list | tuple) else str(rows)
        return cls(path=str(kwargs["path"]), rows=rows)


def parametrize_by_marker(metafunc: pytest.Metafunc) -> None:
    """Turn ``@pytest.mark.osmosis_dataset`` into one call per row (ids = row keys)."""
    mark = metafunc.definition.get_closest_marker("osmosis_dataset")
    if mark is None:
        return
    from osmosis_rollout.dataset import load_dataset
    from osmosis_rollout.errors import DatasetError

    where = metafunc.definition.nodeid
    spec = DatasetMarker.from_mark(mark, where)
    path = Path(spec.path)
    if not path.is_absolute():
        beside_test = Path(metafunc.definition.path).parent / path
        path = beside_test if beside_test.exists() else Path(metafunc.config.rootpath) / path
    try:
        rows = load_dataset(path, rows=spec.rows)
    except DatasetError as exc:
        raise pytest.UsageError(f"{where}: osmosis_dataset: {exc}") from exc
    metafunc.parametrize("osmosis_row", rows, ids=[row.key for row in rows])


@contextmanager
def policy_servers() -> Iterator[Callable[..., Any]]:
    """``start(policy, **options)`` serves ``policy`` on loopback; every server stops on exit."""
    from osmosis_rollout.controller import PolicyServer

    servers: list[Any] = []

    def start(policy: Any, **options: Any) -> Any:
        server = PolicyServer(policy, **options)
        server.start()
        servers.append(server)
        return server

    try:
        yield start
    finally:
        for server in servers:
            server.stop()


@dataclass
class RunResult:
    """One finished rollout, as ``osmosis_run`` returns it."""

    rollout_id: str
    status: str
    sample: RolloutSample | None
    reward: float | None
    err_message: str | None
    err_category: str | None
    calls: list[Any] = field(default_factory=list)
    result: ExecutionResult | None = None

    @property
    def error(self) -> str | None:
        """The error message, when the rollout failed."""
        return self.err_message

    @property
    def ok(self) -> bool:
        """True when the rollout succeeded."""
        return self.status == "success"


def _prompt_messages(
    prompt: Any, row: DatasetRow | dict[str, Any] | None
) -> tuple[list[dict[str, Any]], str | None, Any]:
    if row is not None:
        if isinstance(row, dict):
            from osmosis_rollout.dataset import row_from_dict

            row = row_from_dict(row)
        return list(row.initial_messages), row.label, row.metadata
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}], None, None
    if isinstance(prompt, list):
        return list(prompt), None, None
    raise TypeError(
        "osmosis_run: pass prompt= (a string or a message list) or row= (a dataset row)"
    )


def osmosis_run_fixture() -> Iterator[Any]:
    from pytest_osmosis.run.scheduler import RolloutScheduler

    # A private loop on its own thread, so the fixture works from sync and async tests.
    loop = RolloutScheduler(concurrency=1)
    try:
        with policy_servers() as start:
            yield functools.partial(_run, loop, start)
    finally:
        loop.close()


def _run(
    loop: RolloutScheduler,
    start: Callable[..., Any],
    workflow: Any,
    grader: Any = None,
    *,
    prompt: Any = None,
    row: Any = None,
    label: str | None = None,
    metadata: dict[str, Any] | None = None,
    policy: Any = None,
    workflow_config: Any = None,
    grader_config: Any = None,
    agent_timeout: float | None = None,
    grader_timeout: float | None = None,
    grade: bool = True,
) -> RunResult:
    """One rollout in-process, as ``osmosis_run(...)`` runs it."""
    from osmosis_rollout import ExecutionRequest, LocalBackend, RolloutContext, RolloutStatus
    from osmosis_rollout.execution import execute_in_process

    messages, row_label, row_metadata = _prompt_messages(prompt, row)
    server = start(policy if policy is not None else (lambda request: ""), scoped_keys=True)
    backend = LocalBackend(
        workflow=workflow,
        workflow_config=workflow_config,
        grader=grader,
        grader_config=grader_config,
    )
    rollout_id = f"osmosis-run-{uuid.uuid4().hex[:12]}"
    key = server.bind(rollout_id, row=row if isinstance(row, dict) else None)
    execution_request = ExecutionRequest(
        id=rollout_id,
        prompt=messages,
        label=label if label is not None else row_label,
        metadata=metadata if metadata is not None else row_metadata,
        agent_timeout_sec=agent_timeout,
        grader_timeout_sec=grader_timeout,
        grade=grade,
    )
    context = RolloutContext(
        chat_completions_url=server.rollout_url(rollout_id), api_key=key, rollout_id=rollout_id
    )
    result = loop.run(
        lambda: execute_in_process(backend, execution_request, context), RUN_TIMEOUT_SEC
    ).result
    sample = result.sample
    # As on the wire: a reward only of a successful rollout whose sample is kept.
    kept = result.status is RolloutStatus.SUCCESS and not (sample and sample.remove_sample)
    return RunResult(
        rollout_id=rollout_id,
        status=str(result.status),
        sample=sample,
        reward=sample.reward if sample is not None and kept else None,
        err_message=result.err_message,
        err_category=str(result.err_category) if result.err_category else None,
        calls=list(server.release(rollout_id).calls),
        result=result,
    )
