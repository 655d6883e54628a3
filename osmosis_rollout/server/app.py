"""``create_rollout_server``: the FastAPI app that serves a backend over the rollout protocol.

Routes (spec I.1): ``POST /rollout`` (admission), ``GET /rollout/{id}/result`` (long poll
under a lease), ``POST /rollout/cancel``, ``GET /health``, and, when enabled,
``GET /metrics`` (Prometheus text). The registry (``registry.py``) owns entries, leases and
retention; this module owns admission, execution of one rollout, and the lifespan drain.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from osmosis_rollout.artifacts import default_artifact_root
from osmosis_rollout.backend.base import ExecutionBackend
from osmosis_rollout.backend.local import categorize_exception
from osmosis_rollout.context import RolloutContext, RolloutProgress
from osmosis_rollout.server.auth import BearerAuthMiddleware, ControllerAuth
from osmosis_rollout.server.limits import (
    DEFAULT_MAX_BODY_BYTES,
    BodySizeLimitMiddleware,
    check_max_body_bytes,
)
from osmosis_rollout.server.metrics import CONTENT_TYPE, RolloutMetrics
from osmosis_rollout.server.registry import (
    DuplicateRolloutError,
    InvalidLeaseError,
    RolloutEntry,
    RolloutRegistry,
    UnknownRolloutError,
    WireResult,
    cancelled_result,
    check_timeouts,
)
from osmosis_rollout.server.shutdown import DrainPolicy, drain_rollouts
from osmosis_rollout.types import (
    POLLING_LEASE_HEADER,
    CancelRolloutsRequest,
    CancelRolloutsResponse,
    ExecutionOutcome,
    ExecutionRequest,
    ExecutionResult,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutResultResponse,
    RolloutStatus,
)
from osmosis_rollout.types.sample import TERMINAL_STATUSES
from osmosis_rollout.wire import strict_json_bytes, to_wire_result

logger = logging.getLogger(__name__)

DEFAULT_RESULT_WAIT_TIMEOUT_SEC = 30.0
DEFAULT_POLLING_LEASE_TIMEOUT_SEC = 120.0
DEFAULT_RESULT_RETENTION_SEC = 900.0
INSTANCE_ID_ENV = "_OSMOSIS_ROLLOUT_INSTANCE_ID"
RETRY_AFTER_SEC = "5"

StatusObserver = Callable[[str, RolloutStatus], None]
"""Called with ``(rollout_id, status)`` on every server-side status change, terminal included."""

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


def _configure_default_logging() -> None:
    """Add a root INFO handler only when the process has none (uvicorn configures its own)."""
    if logging.getLogger().handlers:
        return
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _detail(status_code: int, detail: str, headers: Mapping[str, str] | None = None) -> Response:
    return JSONResponse({"detail": detail}, status_code=status_code, headers=headers)


def _json_safe_input(value: Any) -> Any:
    """``value`` if strict JSON can carry it, else its ``repr`` (``1e999`` parses to inf)."""
    try:
        strict_json_bytes(value)
    except (TypeError, ValueError, RecursionError):
        return repr(value)
    return value


async def _validation_error(_: Request, exc: Exception) -> Response:
    """422 with FastAPI's usual ``detail`` list, made encodable so it is never a 500."""
    assert isinstance(exc, RequestValidationError)
    detail = []
    for error in exc.errors():
        item: dict[str, Any] = {
            "type": str(error.get("type", "")),
            "loc": [part if isinstance(part, int) else str(part) for part in error.get("loc", ())],
            "msg": str(error.get("msg", "")),
        }
        if "input" in error:
            item["input"] = _json_safe_input(error["input"])
        detail.append(item)
    return Response(
        strict_json_bytes({"detail": detail}), status_code=422, media_type="application/json"
    )


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _save_trajectory(
    root: Path, request: RolloutInitRequest, result: ExecutionResult
) -> None:
    """Archive ``result`` (best-effort); skipped while the trajectory module is unavailable."""
    try:
        from osmosis_rollout.trajectory import save_trajectory
    except ImportError:
        logger.debug(
            "trajectory persistence unavailable; rollout %s not archived", request.rollout_id
        )
        return
    kwargs: dict[str, Any] = {
        "label": request.label,
        "metadata": request.metadata,
        "extra_fields": request.extra_fields,
        "diagnostics": result.extra_fields,
    }
    try:
        if inspect.iscoroutinefunction(save_trajectory):
            await save_trajectory(root, request.rollout_id, result, **kwargs)
        else:
            await asyncio.to_thread(save_trajectory, root, request.rollout_id, result, **kwargs)
    except Exception:
        logger.warning(
            "rollout %s: saving the trajectory failed", request.rollout_id, exc_info=True
        )


async def execute_rollout(
    backend: ExecutionBackend,
    request: RolloutInitRequest,
    *,
    progress: RolloutProgress | None = None,
    process_id: str | None = None,
    artifact_root: Path | None = None,
) -> WireResult:
    """Run one admitted rollout through ``backend`` and return its wire result.

    The rollout's :class:`RolloutContext` (chat URL, ``llm_api_key`` or ``$OSMOSIS_API_KEY``,
    progress) is current while ``execute`` runs. When ``execute`` returned an outcome, its
    ``result_to_save`` is archived before this returns, so the trajectory exists before the
    result becomes visible; an ``execute`` that raised archives nothing.
    """
    rollout_id = request.rollout_id
    context = RolloutContext(
        chat_completions_url=request.chat_completions_url,
        api_key=request.llm_api_key,
        rollout_id=rollout_id,
        progress=progress,
        process_id=process_id,
    )
    outcome: ExecutionOutcome | None = None
    try:
        with context:
            outcome = await backend.execute(
                ExecutionRequest(
                    id=rollout_id,
                    prompt=request.initial_messages,
                    label=request.label,
                    metadata=request.metadata,
                    agent_timeout_sec=request.agent_timeout_sec,
                    grader_timeout_sec=request.grader_timeout_sec,
                    grade=request.grade,
                )
            )
        result = outcome.result
        logger.info("rollout %s finished with status %s", rollout_id, result.status)
    except Exception as exc:
        logger.error("rollout %s: execute() raised: %s", rollout_id, traceback.format_exc())
        result = ExecutionResult(
            status=RolloutStatus.FAILURE,
            err_message=str(exc) or "Internal server error",
            err_category=categorize_exception(exc),
        )
    finally:
        if outcome is not None:
            root = artifact_root if artifact_root is not None else default_artifact_root()
            await _save_trajectory(root, request, outcome.result_to_save)
    return to_wire_result(rollout_id, result)


class _Server:
    """The state behind one app: registry, execution tasks, admission gate, observers."""

    def __init__(
        self,
        backend: ExecutionBackend,
        *,
        result_wait_timeout_sec: float,
        polling_lease_timeout_sec: float,
        result_retention_sec: float,
        artifact_root: Path | None,
        drain: DrainPolicy,
        on_status: StatusObserver | None,
    ) -> None:
        self.backend = backend
        self.result_wait_timeout_sec = result_wait_timeout_sec
        self.polling_lease_timeout_sec = polling_lease_timeout_sec
        self.artifact_root = artifact_root
        self.drain = drain
        self.on_status = on_status
        self.metrics = RolloutMetrics()
        self.tasks: set[asyncio.Task[None]] = set()
        self.admission_lock = asyncio.Lock()
        self.accepting = True
        self.process_id = str(uuid.uuid4())
        self.instance_id = os.environ.get(INSTANCE_ID_ENV) or self.process_id
        self.registry = RolloutRegistry(
            result_wait_timeout_sec=result_wait_timeout_sec,
            polling_lease_timeout_sec=polling_lease_timeout_sec,
            result_retention_sec=result_retention_sec,
            cancel_in_backend=self._cancel_in_backend,
            on_finish=self._on_finish,
        )

    # -- observers -------------------------------------------------------------------------

    def _notify(self, rollout_id: str, status: RolloutStatus) -> None:
        if self.on_status is None:
            return
        try:
            self.on_status(rollout_id, status)
        except Exception:
            logger.warning("rollout status observer failed", exc_info=True)

    def _on_finish(self, entry: RolloutEntry) -> None:
        assert entry.result is not None
        status = RolloutStatus(entry.result["status"])
        self.metrics.record_finished(
            status.value, entry.result["err_category"], time.monotonic() - entry.admitted_at
        )
        self._notify(entry.rollout_id, status)

    # -- backend hooks ---------------------------------------------------------------------

    async def _cancel_in_backend(self, rollout_id: str) -> str | None:
        answer = await _maybe_await(self.backend.cancel_rollouts(ids=[rollout_id]))
        disposition = answer.get(rollout_id) if isinstance(answer, Mapping) else None
        if disposition == "not_found":
            # A backend may say not_found before it created its own task; only a terminal
            # state it still holds means it owns (and will deliver) the outcome.
            state = self.backend.rollout_status(rollout_id)
            status = state.get("status") if isinstance(state, Mapping) else state
            if status not in TERMINAL_STATUSES:
                return None
        return disposition if isinstance(disposition, str) else None

    def lifecycle(self) -> dict[str, Any]:
        """``{"accepting_rollouts", "active_rollouts"}`` for ``/health``."""
        return {
            "accepting_rollouts": self.accepting,
            "active_rollouts": sum(not task.done() for task in self.tasks),
        }

    # -- execution -------------------------------------------------------------------------

    async def run(self, entry: RolloutEntry, request: RolloutInitRequest) -> None:
        """The execution task: mark ``running``, execute, publish the result."""
        await entry.progress.set_status(RolloutStatus.RUNNING)
        try:
            result = await execute_rollout(
                self.backend,
                request,
                progress=entry.progress,
                process_id=self.process_id,
                artifact_root=self.artifact_root,
            )
        except asyncio.CancelledError:
            await self.registry.complete(entry, cancelled_result(entry.rollout_id, started=True))
            raise
        await self.registry.complete(entry, result)

    async def admit(self, request: RolloutInitRequest) -> Response:
        """Admission (spec I.1.2): 503, 429, 409 in that order under one lock, then 202."""
        async with self.admission_lock:
            if not self.accepting:
                self.metrics.record_rejected("shutting_down")
                return _detail(503, "rollout server is shutting down")
            if not self.backend.has_capacity():
                self.metrics.record_rejected("queue_full")
                return _detail(
                    429,
                    "rollout queue is full; retry later",
                    headers={"Retry-After": RETRY_AFTER_SEC},
                )
            try:
                entry, token = await self.registry.register(request.rollout_id)
            except DuplicateRolloutError:
                self.metrics.record_rejected("duplicate")
                return _detail(409, "rollout_id is already registered")
            rollout_id = request.rollout_id
            entry.progress.on_status = lambda status: self._notify(rollout_id, status)
            task: asyncio.Task[None] | None = None
            try:
                task = asyncio.create_task(self.run(entry, request), name=f"rollout-{rollout_id}")
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                await self.registry.bind_task(entry, task)
            except BaseException:
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                await self.registry.discard(entry)
                raise
            self.metrics.record_admitted()
            self._notify(rollout_id, RolloutStatus.QUEUED)
        body = RolloutInitResponse(
            rollout_id=rollout_id,
            status=RolloutStatus.QUEUED,
            polling_lease_token=token,
            result_wait_timeout_sec=self.result_wait_timeout_sec,
            polling_lease_timeout_sec=self.polling_lease_timeout_sec,
        )
        return JSONResponse(body.model_dump(mode="json"), status_code=202)

    async def shutdown(self) -> None:
        """Stop admitting, then drain in stages (spec I.1.8)."""
        async with self.admission_lock:
            self.accepting = False
        hard = await drain_rollouts(
            set(self.tasks), lambda: self.registry.cancel(all=True), self.drain
        )
        if hard:
            logger.warning("%d rollout(s) were hard-cancelled at shutdown", hard)

    def render_metrics(self) -> str:
        """The Prometheus exposition of this server's metrics."""
        in_status: dict[str, int] = {}
        for entry in list(self.registry.entries.values()):
            if not entry.finished:
                key = entry.progress.status.value
                in_status[key] = in_status.get(key, 0) + 1
        queued = in_status.get("queued", 0)
        try:
            concurrency = self.backend.health().get("concurrency")
            if isinstance(concurrency, Mapping) and isinstance(concurrency.get("queued"), int):
                queued = int(concurrency["queued"])
        except Exception:
            logger.debug("backend health unavailable for metrics", exc_info=True)
        return self.metrics.render(
            active=self.lifecycle()["active_rollouts"], queued=queued, in_status=in_status
        )


def create_rollout_server(
    *,
    backend: ExecutionBackend,
    lifespan: Lifespan | None = None,
    configure_logging: bool = True,
    result_wait_timeout_sec: float = DEFAULT_RESULT_WAIT_TIMEOUT_SEC,
    polling_lease_timeout_sec: float = DEFAULT_POLLING_LEASE_TIMEOUT_SEC,
    result_retention_sec: float = DEFAULT_RESULT_RETENTION_SEC,
    api_key: str | None = None,
    artifact_root: str | Path | None = None,
    enable_metrics: bool = False,
    drain: DrainPolicy | None = None,
    on_status: StatusObserver | None = None,
    max_body_bytes: int | None = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """Build the FastAPI app that serves ``backend`` to an Osmosis controller.

    Parameters match the official ``create_rollout_server`` (spec I.1.9); beyond it:
    ``artifact_root`` (where trajectories go; default ``$_OSMOSIS_ROLLOUT_ARTIFACT_ROOT`` or
    ``~/.osmosis``, resolved per save), ``enable_metrics`` (``GET /metrics``, behind the same
    ``api_key``), ``drain`` (shutdown stage timeouts) and ``on_status`` (an observer called
    with ``(rollout_id, status)`` on every status change), ``max_body_bytes`` (request
    bodies over it get 413; default 16 MiB, ``None`` for no limit).

    Raises ``ValueError`` for a blank ``api_key``, inconsistent timeouts or a bad limit.
    """
    auth = ControllerAuth(api_key)
    body_limit = check_max_body_bytes(max_body_bytes)
    check_timeouts(result_wait_timeout_sec, polling_lease_timeout_sec, result_retention_sec)
    if not callable(getattr(backend, "execute", None)):
        raise TypeError(f"backend must be an ExecutionBackend, got {backend!r}")
    if configure_logging:
        _configure_default_logging()
    server = _Server(
        backend,
        result_wait_timeout_sec=result_wait_timeout_sec,
        polling_lease_timeout_sec=polling_lease_timeout_sec,
        result_retention_sec=result_retention_sec,
        artifact_root=Path(artifact_root) if artifact_root is not None else None,
        drain=drain or DrainPolicy(),
        on_status=on_status,
    )

    @asynccontextmanager
    async def lifespan_with_drain(app: FastAPI) -> AsyncIterator[Any]:
        async with AsyncExitStack() as stack:
            state: Any = None
            try:
                if lifespan is not None:
                    state = await stack.enter_async_context(lifespan(app))
                yield state
            finally:
                # Exit order (LIFO): backend.shutdown, registry.close, the caller's lifespan.
                stack.push_async_callback(server.registry.close)
                shutdown_hook = getattr(backend, "shutdown", None)
                if shutdown_hook is not None:
                    stack.push_async_callback(_maybe_await_call, shutdown_hook)
                await server.shutdown()

    app = FastAPI(title="Osmosis rollout server", lifespan=lifespan_with_drain)
    app.state.osmosis_backend = backend
    app.state.osmosis_server = server
    app.state.rollout_registry = server.registry
    app.add_exception_handler(RequestValidationError, _validation_error)
    if body_limit is not None:
        app.add_middleware(BodySizeLimitMiddleware, max_body_bytes=body_limit)
    if auth.enabled:
        # Added last, so outermost: an unauthenticated request never gets to send a body.
        app.add_middleware(BearerAuthMiddleware, auth=auth)

    @app.post("/rollout", status_code=202, response_model=RolloutInitResponse)
    async def admit_rollout(request: RolloutInitRequest) -> Response:
        return await server.admit(request)

    @app.get("/rollout/{rollout_id}/result", response_model=RolloutResultResponse)
    async def rollout_result(
        rollout_id: str,
        lease_token: str = Header(alias=POLLING_LEASE_HEADER, min_length=1),
    ) -> Response:
        try:
            result = await server.registry.wait_for_result(rollout_id, lease_token)
        except UnknownRolloutError:
            return _detail(404, "unknown rollout_id")
        except InvalidLeaseError:
            return _detail(403, "invalid polling lease")
        return Response(strict_json_bytes(result), media_type="application/json")

    @app.post("/rollout/cancel", response_model=CancelRolloutsResponse)
    async def cancel_rollouts(request: CancelRolloutsRequest) -> Response:
        selectors = (request.ids is not None) + (request.prefix is not None) + request.all
        if selectors != 1:
            return _detail(422, "pass exactly one selector: ids, prefix, or all")
        dispositions = await server.registry.cancel(
            ids=request.ids, prefix=request.prefix, all=request.all
        )
        cancelled = sum(d.startswith("cancelled") for d in dispositions.values())
        logger.info("cancelled %d rollout(s)", cancelled)
        return JSONResponse({"dispositions": dispositions})

    @app.get("/health")
    async def health() -> Response:
        payload = dict(await _maybe_await(backend.health()))
        payload["instance_id"] = server.instance_id
        payload["process_id"] = server.process_id
        payload["lifecycle"] = server.lifecycle()
        return JSONResponse(payload)

    if enable_metrics:

        @app.get("/metrics")
        async def metrics() -> Response:
            return Response(server.render_metrics(), media_type=CONTENT_TYPE)

    return app


async def _maybe_await_call(fn: Callable[[], Any]) -> None:
    await _maybe_await(fn())


__all__ = [
    "DEFAULT_POLLING_LEASE_TIMEOUT_SEC",
    "DEFAULT_RESULT_RETENTION_SEC",
    "DEFAULT_RESULT_WAIT_TIMEOUT_SEC",
    "POLLING_LEASE_HEADER",
    "StatusObserver",
    "create_rollout_server",
    "execute_rollout",
]
