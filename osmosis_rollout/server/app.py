"""``create_rollout_server``: the FastAPI app that serves a backend over the rollout protocol.

Routes: ``POST /rollout`` (admission), ``GET /rollout/{id}/result`` (long poll
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
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from osmosis_rollout.backend.base import ExecutionBackend
from osmosis_rollout.context import RolloutContext, RolloutProgress
from osmosis_rollout.execution import execute_in_process
from osmosis_rollout.redaction import (
    LiveRedactor,
    redact_all_handlers,
    redact_handler,
    redact_std_streams,
)
from osmosis_rollout.rollout_notes import taking_notes
from osmosis_rollout.runs.artifacts import default_artifact_root
from osmosis_rollout.server.auth import SERVER_API_KEY_ENV, BearerAuthMiddleware, ControllerAuth
from osmosis_rollout.server.concurrency import (
    AdmissionControl,
    MaxConcurrent,
    parse_max_concurrent,
    supports_concurrency_limit,
)
from osmosis_rollout.server.limits import (
    DEFAULT_MAX_BODY_BYTES,
    BodySizeLimitMiddleware,
    check_max_body_bytes,
)
from osmosis_rollout.server.metrics import CONTENT_TYPE, RolloutMetrics
from osmosis_rollout.server.observability import RolloutObservability
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
from osmosis_rollout.transport.wire import strict_json_bytes, to_wire_result
from osmosis_rollout.types import (
    NOTES_HEADER,
    POLLING_LEASE_HEADER,
    CancelRolloutsRequest,
    CancelRolloutsResponse,
    ExecutionRequest,
    RolloutInitRequest,
    RolloutInitResponse,
    RolloutResultResponse,
    RolloutStatus,
)
from osmosis_rollout.types.sample import TERMINAL_STATUSES

logger = logging.getLogger(__name__)

DEFAULT_RESULT_WAIT_TIMEOUT_SEC = 30.0
DEFAULT_POLLING_LEASE_TIMEOUT_SEC = 120.0
DEFAULT_RESULT_RETENTION_SEC = 900.0
INSTANCE_ID_ENV = "_OSMOSIS_ROLLOUT_INSTANCE_ID"
RETRY_AFTER_SEC = "5"
DRAIN_CANCEL_GRACE_SEC = 3.0
"""How long before the drain deadline still-running rollouts are cancelled (so the cancel
reaches their pollers before the process exits)."""
DRAIN_CHECK_INTERVAL_SEC = 0.05

StatusObserver = Callable[[str, RolloutStatus], None]
"""Called with ``(rollout_id, status)`` on every server-side status change, terminal included."""

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[Any]]


def _configure_default_logging(redactor: LiveRedactor) -> None:
    """Add a root INFO handler only when the process has none (uvicorn configures its own).

    Either way the root handlers redact secrets (a grader's exception may quote a key).
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    for handler in logging.getLogger().handlers:
        redact_handler(handler, redactor)


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


async def execute_rollout(
    backend: ExecutionBackend,
    request: RolloutInitRequest,
    *,
    progress: RolloutProgress | None = None,
    process_id: str | None = None,
    artifact_root: Path | None = None,
    secrets: Mapping[str, str | None] | None = None,
) -> WireResult:
    """Run one admitted rollout through ``backend`` and return its wire result.

    The rollout's :class:`RolloutContext` (chat URL, ``llm_api_key`` or ``$OSMOSIS_API_KEY``,
    progress) is current while ``execute`` runs; the trajectory is archived before this
    returns (see :func:`~osmosis_rollout.execution.execute_in_process`), redacted of the
    environment's secrets, the rollout's key and ``secrets`` (name -> value).
    """
    rollout_id = request.rollout_id
    context = RolloutContext(
        chat_completions_url=request.chat_completions_url,
        api_key=request.llm_api_key,
        rollout_id=rollout_id,
        progress=progress,
        process_id=process_id,
    )
    executed = await execute_in_process(
        backend,
        ExecutionRequest(
            id=rollout_id,
            prompt=request.initial_messages,
            label=request.label,
            metadata=request.metadata,
            agent_timeout_sec=request.agent_timeout_sec,
            grader_timeout_sec=request.grader_timeout_sec,
            grade=request.grade,
        ),
        context,
        trajectory_root=artifact_root if artifact_root is not None else default_artifact_root(),
        trajectory_extra_fields=request.extra_fields,
        secrets=secrets,
    )
    wire = to_wire_result(rollout_id, executed.result)
    notes = executed.wire_notes()
    if notes is not None:
        wire["notes"] = notes
    return wire


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
        inbound_key: str | None = None,
    ) -> None:
        self.backend = backend
        self.artifact_root = artifact_root
        self.drain = drain
        self.on_status = on_status
        self.metrics = RolloutMetrics()
        self.observability = RolloutObservability()
        self.metrics_enabled = False
        self.max_body_bytes: int | None = None
        self.admission: AdmissionControl | None = None
        self.connections: Any = None  # the runner's ConnectionGuard, when it serves the app
        self.tasks: set[asyncio.Task[None]] = set()
        self.admission_lock = asyncio.Lock()
        self.accepting = True
        self.process_id = str(uuid.uuid4())
        self.instance_id = os.environ.get(INSTANCE_ID_ENV) or self.process_id
        self.secrets: dict[str, str | None] = {SERVER_API_KEY_ENV: inbound_key}
        """Secrets handed to this server beyond the environment's (name -> value)."""
        self.redactor = LiveRedactor.from_environment(extra=self.secrets)
        """Redacts all this process writes: those secrets, and each running rollout's key."""
        self.registry = RolloutRegistry(
            result_wait_timeout_sec=result_wait_timeout_sec,
            polling_lease_timeout_sec=polling_lease_timeout_sec,
            result_retention_sec=result_retention_sec,
            cancel_in_backend=self._cancel_in_backend,
            on_finish=self._on_finish,
        )

    def add_secret(self, name: str, value: str | None) -> None:
        """Redact ``value`` (as ``[REDACTED:name]``) from everything this server writes."""
        self.secrets[name] = value
        self.redactor.add(name, value)

    # -- observers -------------------------------------------------------------------------

    def _notify(
        self, rollout_id: str, status: RolloutStatus, error_category: str | None = None
    ) -> None:
        self.observability.record(rollout_id, status, error_category)
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
        self._notify(entry.rollout_id, status, entry.result["err_category"])

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

    def _release(self, rollout_id: str) -> None:
        release = getattr(self.backend, "release", None)
        if release is None:
            return
        try:
            release(rollout_id)
        except Exception:
            logger.warning("rollout %s: backend release failed", rollout_id, exc_info=True)

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
            with self.observability.executing(entry.rollout_id):
                result = await execute_rollout(
                    self.backend,
                    request,
                    progress=entry.progress,
                    process_id=self.process_id,
                    artifact_root=self.artifact_root,
                    secrets=self.secrets,
                )
        except asyncio.CancelledError:
            # A cancel is an outcome the controller asked for, not a fault: one line, no trace.
            logger.info("rollout %s cancelled", entry.rollout_id)
            await self.registry.complete(entry, cancelled_result(entry.rollout_id, started=True))
            raise
        if result.get("err_message"):
            # The controller shows it (dashboards, reports): no key a workflow raised with.
            result["err_message"] = self.redactor.redact(str(result["err_message"]))
        notes = result.get("notes")
        if isinstance(notes, dict):
            # The grader's reason and a traceback quote what user code saw, keys included.
            # A lone surrogate (text user code decoded badly) has no UTF-8 form: "?" keeps
            # the note, and the result it rides on, encodable.
            result["notes"] = {
                key: self.redactor.redact(str(value))
                .encode("utf-8", errors="replace")
                .decode("utf-8")
                for key, value in notes.items()
            }
        await self.registry.complete(entry, result)

    def _overloaded(self, retry_after: str) -> Response:
        self.metrics.record_rejected("queue_full")
        return _detail(
            429, "rollout queue is full; retry later", headers={"Retry-After": retry_after}
        )

    async def admit(self, request: RolloutInitRequest) -> Response:
        """Admission: 503, 429, 409 in that order under one lock, then 202."""
        admission = self.admission
        if admission is not None:
            admission.start()
            if self.accepting and not admission.admits(request.agent_timeout_sec):
                # Refused without waiting for the lock (held across awaits by admissions).
                return self._overloaded(admission.retry_after())
        async with self.admission_lock:
            if not self.accepting:
                self.metrics.record_rejected("shutting_down")
                # Retry-After (beyond the official 503): a rolling restart's replacement
                # will be up by then, and a controller can retry there.
                return _detail(
                    503, "rollout server is shutting down", headers={"Retry-After": RETRY_AFTER_SEC}
                )
            if not self.backend.has_capacity():
                return self._overloaded(RETRY_AFTER_SEC)
            if admission is not None and not admission.admits(request.agent_timeout_sec):
                return self._overloaded(admission.retry_after())
            try:
                entry, token = await self.registry.register(request.rollout_id)
            except DuplicateRolloutError:
                self.metrics.record_rejected("duplicate")
                return _detail(409, "rollout_id is already registered")
            rollout_id = request.rollout_id
            entry.progress.on_status = lambda status: self._notify(rollout_id, status)
            task: asyncio.Task[None] | None = None
            key = request.llm_api_key
            # The rollout's key is a secret of this process while the rollout runs.
            self.redactor.hold("POLICY_API_KEY", key)
            try:
                with self.observability.admission(rollout_id, request.metadata):
                    # Backends written against the official contract have no reserve/release.
                    if (reserve := getattr(self.backend, "reserve", None)) is not None:
                        reserve(rollout_id)
                    task = asyncio.create_task(
                        self.run(entry, request), name=f"rollout-{rollout_id}"
                    )
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
                    task.add_done_callback(lambda _: self._release(rollout_id))
                    task.add_done_callback(lambda _: self.redactor.release(key))
                    await self.registry.bind_task(entry, task)
            except BaseException:
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
                else:
                    self._release(rollout_id)
                    self.redactor.release(key)
                await self.registry.discard(entry)
                raise
            self.metrics.record_admitted()
            self._notify(rollout_id, RolloutStatus.QUEUED)
        body = RolloutInitResponse(
            rollout_id=rollout_id,
            status=RolloutStatus.QUEUED,
            polling_lease_token=token,
            result_wait_timeout_sec=self.registry.result_wait_timeout_sec,
            polling_lease_timeout_sec=self.registry.leases.timeout_sec,
        )
        return JSONResponse(body.model_dump(mode="json"), status_code=202)

    async def drain_before_exit(self, timeout_sec: float) -> list[str]:
        """The staged drain a SIGTERM starts (before the listener closes; see ``runner``).

        Admissions get 503 at once; polls and cancels keep being served until every
        rollout has finished and its result was fetched (or its lease lapsed), or until
        ``timeout_sec``. Rollouts still running shortly before the deadline are cancelled
        so that their pollers can still fetch a ``cancelled`` result. Returns the ids a
        controller was still owed when the drain ended (empty when nothing was lost).
        """
        async with self.admission_lock:
            self.accepting = False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_sec
        cancel_at = deadline - min(DRAIN_CANCEL_GRACE_SEC, timeout_sec / 5)
        waiting = self.registry.awaiting_controller()
        logger.warning(
            "draining: refusing new rollouts; %d result(s) still owed to controllers (up to %ss)",
            len(waiting),
            timeout_sec,
        )
        if not await self._settled_by(cancel_at):
            running = [e.rollout_id for e in self.registry.entries.values() if not e.finished]
            if running:
                logger.warning(
                    "draining: cancelling %d rollout(s) still running so their pollers get "
                    "a result",
                    len(running),
                )
                await self.registry.cancel(ids=running)
            await self._settled_by(deadline)
        waiting = self.registry.awaiting_controller()
        if waiting:
            logger.warning(
                "drain deadline passed; %d result(s) never fetched: %s",
                len(waiting),
                ", ".join(waiting[:20]),
            )
        else:
            logger.info("drained: every result was fetched")
        return waiting

    async def _settled_by(self, until: float) -> bool:
        """Wait until no controller is owed a result (True) or ``until`` passes (False)."""
        loop = asyncio.get_running_loop()
        while self.registry.awaiting_controller():
            if loop.time() >= until:
                return False
            await asyncio.sleep(DRAIN_CHECK_INTERVAL_SEC)
        return True

    async def shutdown(self) -> None:
        """Stop admitting, then drain in stages."""
        async with self.admission_lock:
            self.accepting = False
        if self.admission is not None:
            self.admission.stop()
        hard = await drain_rollouts(
            set(self.tasks), lambda: self.registry.cancel(all=True), self.drain
        )
        if hard:
            logger.warning("%d rollout(s) were hard-cancelled at shutdown", hard)

    def render_metrics(self) -> str:
        """The Prometheus exposition of this server's metrics."""
        entries = list(self.registry.entries.values())
        in_status = Counter(e.progress.status.value for e in entries if not e.finished)
        queued = in_status.get("queued", 0)
        try:
            concurrency = self.backend.health().get("concurrency")
            if isinstance(concurrency, Mapping) and isinstance(concurrency.get("queued"), int):
                queued = int(concurrency["queued"])
        except Exception:
            logger.debug("backend health unavailable for metrics", exc_info=True)
        return self.metrics.render(
            active=self.lifecycle()["active_rollouts"],
            queued=queued,
            in_status=in_status,
            admission=self.admission.snapshot() if self.admission is not None else None,
            connections=self.connections.snapshot() if self.connections is not None else None,
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
    max_queue_depth: int | None = None,
    max_concurrent: MaxConcurrent | None = None,
) -> FastAPI:
    """Build the FastAPI app that serves ``backend`` to an Osmosis controller.

    Parameters match the official ``create_rollout_server``; beyond it: ``artifact_root``
    (where trajectories go; default ``$_OSMOSIS_ROLLOUT_ARTIFACT_ROOT`` or ``~/.osmosis``,
    resolved per save), ``enable_metrics`` (``GET /metrics``, behind the same ``api_key``),
    ``drain`` (shutdown stage timeouts), ``on_status`` (called with ``(rollout_id, status)``
    on every status change), ``max_body_bytes`` (larger bodies get 413; default 16 MiB,
    ``None``: no limit), ``max_queue_depth`` (the backend's queue bound, as LocalBackend's:
    admissions beyond the running slots plus this many waiting get 429 with ``Retry-After``)
    and ``max_concurrent`` (``"auto"``, an adaptive limit, or N, capped by the backend's own
    and admitting a short queue beyond it, see ``server/concurrency.py``; ``None`` leaves it).

    Raises ``ValueError`` for a blank ``api_key``, inconsistent timeouts or a bad limit. As in
    the official SDK, ``backend`` is not checked (``backend=None`` still serves its OpenAPI
    schema); a backend without ``execute`` fails each rollout it admits.
    """
    auth = ControllerAuth(api_key)
    body_limit = check_max_body_bytes(max_body_bytes)
    if max_queue_depth is not None:
        set_queue_depth(backend, max_queue_depth)
    server = _Server(  # its registry checks the timings
        backend,
        result_wait_timeout_sec=result_wait_timeout_sec,
        polling_lease_timeout_sec=polling_lease_timeout_sec,
        result_retention_sec=result_retention_sec,
        artifact_root=Path(artifact_root) if artifact_root is not None else None,
        drain=drain or DrainPolicy(),
        on_status=on_status,
        inbound_key=auth.api_key,
    )
    if max_concurrent is not None:
        set_max_concurrent(server, max_concurrent)
    if configure_logging:
        _configure_default_logging(server.redactor)

    @asynccontextmanager
    async def lifespan_with_drain(app: FastAPI) -> AsyncIterator[Any]:
        async with AsyncExitStack() as stack:
            state: Any = None
            try:
                if configure_logging:
                    # After uvicorn configured its loggers: every handler then known redacts,
                    # and so do sys.stdout/stderr (user code's prints, tracebacks, warnings).
                    redact_all_handlers(server.redactor)
                    stack.callback(redact_std_streams(server.redactor))
                if lifespan is not None:
                    state = await stack.enter_async_context(lifespan(app))
                # What a grader logs is its reason, sent with the result (``notes``).
                stack.enter_context(taking_notes())
                server.observability.start()
                yield state
            finally:
                # Exit order (LIFO): backend.shutdown, registry.close, the last ownership
                # events flushed, the caller's lifespan.
                stack.push_async_callback(asyncio.to_thread, server.observability.close)
                stack.push_async_callback(server.registry.close)
                hook = getattr(backend, "shutdown", None)
                if hook is not None:
                    stack.push_async_callback(lambda: _maybe_await(hook()))
                await server.shutdown()

    app = FastAPI(title="Osmosis rollout server", lifespan=lifespan_with_drain)
    app.state.osmosis_backend = backend
    app.state.osmosis_server = server
    app.state.rollout_registry = server.registry
    app.add_exception_handler(RequestValidationError, _validation_error)
    server.max_body_bytes = body_limit
    app.add_middleware(BodySizeLimitMiddleware, max_body_bytes=lambda: server.max_body_bytes)
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
        notes: str | None = Header(default=None, alias=NOTES_HEADER),
    ) -> Response:
        try:
            result = await server.registry.wait_for_result(rollout_id, lease_token)
        except UnknownRolloutError:
            return _detail(404, "unknown rollout_id")
        except InvalidLeaseError:
            return _detail(403, "invalid polling lease")
        if "notes" in result and notes != "1":
            # Only a controller that asks gets the notes: the official one sees the
            # official result, key for key.
            result = {key: value for key, value in result.items() if key != "notes"}
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
        if server.admission is not None:
            payload["admission"] = server.admission.snapshot()
        if server.connections is not None:
            payload["connections"] = server.connections.snapshot()
        return JSONResponse(payload)

    if enable_metrics:
        _add_metrics_route(app, server)
    return app


def _add_metrics_route(app: FastAPI, server: _Server) -> None:
    if server.metrics_enabled:
        return
    server.metrics_enabled = True

    async def metrics() -> Response:
        return Response(server.render_metrics(), media_type=CONTENT_TYPE)

    app.add_api_route("/metrics", metrics, methods=["GET"])


def configure_rollout_app(
    app: Any,
    *,
    result_wait_timeout_sec: float | None = None,
    polling_lease_timeout_sec: float | None = None,
    result_retention_sec: float | None = None,
    enable_metrics: bool = False,
    max_body_bytes: int | None = None,
    max_queue_depth: int | None = None,
    max_concurrent: MaxConcurrent | None = None,
) -> None:
    """Apply server options to an app ``create_rollout_server`` already built.

    This is how ``osmosis-rollout serve main.py --enable-metrics`` (and the other server
    flags) reach an entrypoint that defines its own ``app``. ``None`` (or ``False``) leaves
    an option as the entrypoint set it. Call it before the app starts serving.

    Raises ``TypeError`` for an app that ``create_rollout_server`` did not build, and
    ``ValueError`` for inconsistent timings or a bad limit.
    """
    server = rollout_server_of(app)
    if server is None:
        raise TypeError(
            f"{app!r} was not built by create_rollout_server, so its server options cannot "
            "be set from outside; pass them where the app is built"
        )
    registry = server.registry
    wait, lease_timeout, retention = (
        given if given is not None else current
        for given, current in (
            (result_wait_timeout_sec, registry.result_wait_timeout_sec),
            (polling_lease_timeout_sec, registry.leases.timeout_sec),
            (result_retention_sec, registry.result_retention_sec),
        )
    )
    check_timeouts(wait, lease_timeout, retention)
    body_limit = server.max_body_bytes
    if max_body_bytes is not None:
        body_limit = check_max_body_bytes(max_body_bytes)
    if max_queue_depth is not None:
        set_queue_depth(server.backend, max_queue_depth)
    if max_concurrent is not None:
        set_max_concurrent(server, max_concurrent)
    registry.result_wait_timeout_sec = wait
    registry.leases.timeout_sec = lease_timeout
    registry.result_retention_sec = retention
    server.max_body_bytes = body_limit
    if enable_metrics:
        _add_metrics_route(app, server)


def set_queue_depth(backend: ExecutionBackend, depth: int) -> None:
    """Set ``backend.max_queue_depth``; ``TypeError`` for a backend without a queue bound."""
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
        raise ValueError(f"max_queue_depth must be an integer >= 0, got {depth!r}")
    if not hasattr(backend, "max_queue_depth"):
        raise TypeError(
            f"max_queue_depth: {type(backend).__name__} has no queue bound to set (LocalBackend "
            "has one); bound its queue in its own has_capacity() instead"
        )
    backend.max_queue_depth = depth


def set_max_concurrent(server: _Server, value: MaxConcurrent) -> None:
    """Put the rollouts running under ``value`` (``"auto"`` or N); ``TypeError`` if impossible."""
    max_concurrent = parse_max_concurrent(value)
    if server.admission is not None:
        raise ValueError(
            "max_concurrent is already set where this app was built; set it in one place "
            "(create_rollout_server(max_concurrent=...) or serve --max-concurrent)"
        )
    if not supports_concurrency_limit(server.backend):
        raise TypeError(
            f"max_concurrent: {type(server.backend).__name__} runs rollouts under no "
            "concurrency limiter of its own (LocalBackend does); bound it in the backend"
        )
    server.admission = AdmissionControl(server.backend, max_concurrent)  # type: ignore[arg-type]


def adaptive_concurrency_applies(app: Any) -> bool:
    """True when ``serve``'s default ``--max-concurrent auto`` can apply to ``app``.

    It applies to an app ``create_rollout_server`` built over a backend with a limiter
    (LocalBackend) whose concurrency nobody set yet.
    """
    server = rollout_server_of(app)
    return (
        server is not None
        and server.admission is None
        and supports_concurrency_limit(server.backend)
    )


def rollout_server_of(app: Any) -> _Server | None:
    """The rollout server state behind an app ``create_rollout_server`` built, else None."""
    server = getattr(getattr(app, "state", None), "osmosis_server", None)
    return server if isinstance(server, _Server) else None


__all__ = [
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_POLLING_LEASE_TIMEOUT_SEC",
    "DEFAULT_RESULT_RETENTION_SEC",
    "DEFAULT_RESULT_WAIT_TIMEOUT_SEC",
    "POLLING_LEASE_HEADER",
    "StatusObserver",
    "adaptive_concurrency_applies",
    "configure_rollout_app",
    "create_rollout_server",
    "execute_rollout",
]
