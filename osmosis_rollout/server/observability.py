"""The platform's rollout-ownership events, and opt-in traces, over OTLP/HTTP.

**Ownership events**, exactly as the official server (osmosis-ai 0.3.8) sends them: with
``OSMOSIS_ROLLOUT_OTLP_ENDPOINT`` set, every status a rollout takes (``queued`` once admitted,
each change, the terminal one whatever fixed it) is one OpenTelemetry log record, body
``Rollout ownership``, severity ``INFO``, to ``<endpoint>/v1/logs``, with the attributes

- ``event`` = ``rollout.ownership``, ``rollout_id``, ``status``, ``event_sequence`` (1, 2, ...
  per server process);
- ``server_id`` (``$OSMOSIS_ROLLOUT_SERVER_ID``, else ``$_OSMOSIS_ROLLOUT_INSTANCE_ID``, else
  the host name), ``server_name`` (``$_OSMOSIS_ROLLOUT_NAME``), ``namespace``
  (``$OSMOSIS_ROLLOUT_NAMESPACE``), each only when set;
- ``run_id``, ``run_name`` from the request's ``metadata["osmosis_observability"]``, when given.

Every text is bounded (at most 512 printable characters, else left out); a rollout whose id is
not such a text sends nothing. Nothing else of a request, and no secret, is ever sent. The
export is batched on its own thread (queue 1024, batches of 128, every second, 2 s per
request); a failing collector costs a warning, never an admission, lease or result. At
shutdown what is still queued gets :data:`CLOSE_TIMEOUT_SEC` (2 s) to reach the collector,
then is dropped with one warning: a collector that accepts and never answers cannot hold a
stopping server.

**Traces** (ours, beyond the official): with ``OSMOSIS_ROLLOUT_OTLP_TRACES=1`` as well, each
rollout is one trace to ``<endpoint>/v1/traces``: a ``rollout`` span from admission to its
result, carrying ``osmosis.rollout.id``, ``osmosis.rollout.status`` and
``osmosis.rollout.error_category``, with children ``admission``, ``queue``, ``workflow``,
``grader`` and one ``model call`` per chat-completions call made through the rollout clients.

OpenTelemetry (the ``otel`` extra) is imported only when the endpoint is set.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from osmosis_rollout._internal.imports import require_extra
from osmosis_rollout.transport.telemetry import trace_model_calls
from osmosis_rollout.types import RolloutStatus
from osmosis_rollout.types.sample import TERMINAL_STATUSES

logger = logging.getLogger(__name__)

ENDPOINT_ENV = "OSMOSIS_ROLLOUT_OTLP_ENDPOINT"
TRACES_ENV = "OSMOSIS_ROLLOUT_OTLP_TRACES"
SERVER_ID_ENV = "OSMOSIS_ROLLOUT_SERVER_ID"
INSTANCE_ID_ENV = "_OSMOSIS_ROLLOUT_INSTANCE_ID"
NAME_ENV = "_OSMOSIS_ROLLOUT_NAME"
NAMESPACE_ENV = "OSMOSIS_ROLLOUT_NAMESPACE"
METADATA_KEY = "osmosis_observability"
"""The request metadata entry whose ``run_id`` and ``run_name`` the events carry."""

MAX_TEXT = 512
SERVICE_NAME = "osmosis-rollout-server"
# The official server's instrumentation scope: dashboards may select the events by it.
SCOPE = "osmosis_ai.rollout.server.observability"
BATCHING: dict[str, Any] = {
    "max_queue_size": 1024,
    "max_export_batch_size": 128,
    "schedule_delay_millis": 1000,
    "export_timeout_millis": 3000,
}
"""The batch processors' settings (logs and spans alike)."""
EXPORT_TIMEOUT_SEC = 2
CLOSE_TIMEOUT_SEC = 2.0
"""At shutdown, how long the last events may take to reach the collector before they are dropped."""

_PHASES = {RolloutStatus.RUNNING: "workflow", RolloutStatus.GRADING: "grader"}


def _text(value: object) -> str | None:
    """``value`` if it is a bounded, printable, non-blank text, else None."""
    if (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > MAX_TEXT
        or not value.isprintable()
    ):
        return None
    return value


@dataclass
class _Traced:
    """One rollout's fields and open spans."""

    fields: dict[str, str] | None
    root: Any = None
    phase: Any = None
    parent: Any = field(default=None, repr=False)
    """The OpenTelemetry context whose span is ``root`` (parent of the phases and calls)."""


class RolloutObservability:
    """Ownership events and traces of one rollout server (inert without the endpoint)."""

    def __init__(self) -> None:
        owner = {
            "server_id": os.environ.get(SERVER_ID_ENV)
            or os.environ.get(INSTANCE_ID_ENV)
            or socket.gethostname(),
            "server_name": os.environ.get(NAME_ENV, ""),
            "namespace": os.environ.get(NAMESPACE_ENV, ""),
        }
        self.owner = {key: value for key, value in owner.items() if _text(value) is not None}
        self.enabled = False
        self._providers: list[Any] = []
        self._log: Any = None
        self._tracer: Any = None
        self._trace_api: Any = None
        self._sequence = 0
        self._lock = threading.Lock()
        self._rollouts: dict[str, _Traced] = {}
        self._endpoint = ""

    def start(self) -> None:
        """Start exporting when ``$OSMOSIS_ROLLOUT_OTLP_ENDPOINT`` is set (else do nothing).

        Raises :class:`~osmosis_rollout.errors.MissingExtraError` when it is set and the
        ``otel`` extra is not installed.
        """
        endpoint = os.environ.get(ENDPOINT_ENV, "").rstrip("/")
        if not endpoint:
            return
        self._endpoint = endpoint
        require_extra("opentelemetry.sdk", extra="otel", package="opentelemetry-sdk")
        require_extra(
            "opentelemetry.exporter.otlp.proto.http",
            extra="otel",
            package="opentelemetry-exporter-otlp-proto-http",
        )
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource

        # Own providers, never the application's global ones.
        resource = Resource({"service.name": SERVICE_NAME})
        # No exit hook of their own: one would flush at interpreter exit, unbounded.
        logs = LoggerProvider(resource=resource, shutdown_on_exit=False)
        logs.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", timeout=EXPORT_TIMEOUT_SEC),
                **BATCHING,
            )
        )
        self._providers.append(logs)
        self._log = logs.get_logger(SCOPE)
        if os.environ.get(TRACES_ENV, "").strip().lower() in {"1", "true", "yes", "on"}:
            self._start_traces(endpoint, resource)
        self.enabled = True

    def _start_traces(self, endpoint: str, resource: Any) -> None:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        spans = TracerProvider(resource=resource, shutdown_on_exit=False)
        spans.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=EXPORT_TIMEOUT_SEC),
                **BATCHING,
            )
        )
        self._providers.append(spans)
        self._tracer = spans.get_tracer(SCOPE)
        self._trace_api = trace

    # -- per rollout -----------------------------------------------------------------------

    def fields(self, rollout_id: str, metadata: Mapping[str, Any] | None) -> dict[str, str] | None:
        """The event attributes of a rollout (None when its id or the server id is unusable)."""
        if _text(rollout_id) is None or "server_id" not in self.owner:
            return None
        fields = {"event": "rollout.ownership", "rollout_id": rollout_id, **self.owner}
        supplied = (metadata or {}).get(METADATA_KEY)
        if isinstance(supplied, dict):
            for key in ("run_id", "run_name"):
                if value := _text(supplied.get(key)):
                    fields[key] = value
        return fields

    @contextlib.contextmanager
    def admission(self, rollout_id: str, metadata: Mapping[str, Any] | None) -> Iterator[None]:
        """Around registering an admitted rollout: it is known (its trace begun) from here on.

        An admission that raises leaves nothing (its trace's root marked not admitted).
        """
        if not self.enabled:
            yield
            return
        traced = _Traced(self.fields(rollout_id, metadata))
        if self._tracer is not None:
            traced.root = self._tracer.start_span(
                "rollout", attributes={"osmosis.rollout.id": rollout_id, **self._run_of(traced)}
            )
            traced.parent = self._trace_api.set_span_in_context(traced.root)
        with self._lock:
            self._rollouts[rollout_id] = traced
        span = self._open(traced, "admission")
        try:
            yield
        except BaseException:
            self._forget(rollout_id)
            raise
        finally:
            if span is not None:
                span.end()
        if traced.phase is None:  # no status yet (the task may already have started)
            traced.phase = self._open(traced, "queue")

    def _forget(self, rollout_id: str) -> None:
        with self._lock:
            traced = self._rollouts.pop(rollout_id, None)
        if traced is not None and traced.root is not None:
            traced.root.set_attribute("osmosis.rollout.admitted", False)
            traced.root.end()

    def record(
        self, rollout_id: str, status: RolloutStatus, error_category: str | None = None
    ) -> None:
        """One ownership event for ``rollout_id`` taking ``status``; spans follow it."""
        traced = self._rollouts.get(rollout_id)
        if traced is None:
            return
        try:
            self._emit(traced.fields, status)
            if traced.root is not None:
                self._advance(traced, status, error_category)
        except Exception:
            # Observability failures must never affect admission, leases or results.
            logger.warning("could not record rollout ownership", exc_info=False)
        if status in TERMINAL_STATUSES:
            with self._lock:
                self._rollouts.pop(rollout_id, None)

    @contextlib.contextmanager
    def executing(self, rollout_id: str) -> Iterator[None]:
        """Around a rollout's execution: its model calls become spans of its trace."""
        traced = self._rollouts.get(rollout_id)
        if traced is None or traced.parent is None:
            yield
            return
        with trace_model_calls(lambda name, attributes: self._span(traced, name, attributes)):
            yield

    # -- internals -------------------------------------------------------------------------

    def _emit(self, fields: Mapping[str, str] | None, status: RolloutStatus) -> None:
        if self._log is None or fields is None:
            return
        with self._lock:
            self._sequence += 1
            sequence = self._sequence
        self._log.emit(
            timestamp=time.time_ns(),
            severity_text="INFO",
            body="Rollout ownership",
            attributes={**fields, "status": status.value, "event_sequence": sequence},
        )

    @staticmethod
    def _run_of(traced: _Traced) -> dict[str, str]:
        fields = traced.fields or {}
        return {f"osmosis.{key}": fields[key] for key in ("run_id", "run_name") if key in fields}

    def _open(self, traced: _Traced, name: str) -> Any:
        if self._tracer is None or traced.parent is None:
            return None
        return self._tracer.start_span(name, context=traced.parent)

    def _advance(self, traced: _Traced, status: RolloutStatus, error_category: str | None) -> None:
        phase = _PHASES.get(status)
        if phase is None and status not in TERMINAL_STATUSES:
            return
        if traced.phase is not None:
            traced.phase.end()
            traced.phase = None
        if phase is not None:
            traced.phase = self._open(traced, phase)
            return
        root = traced.root
        root.set_attribute("osmosis.rollout.status", status.value)
        if error_category:
            root.set_attribute("osmosis.rollout.error_category", error_category)
        if status is not RolloutStatus.SUCCESS:
            from opentelemetry.trace import Status, StatusCode

            root.set_status(Status(StatusCode.ERROR, error_category or status.value))
        root.end()

    @contextlib.contextmanager
    def _span(self, traced: _Traced, name: str, attributes: dict[str, Any]) -> Iterator[None]:
        span = self._tracer.start_span(name, context=traced.parent, attributes=attributes)
        try:
            yield
        except BaseException as exc:
            span.record_exception(exc)
            raise
        finally:
            span.end()

    def close(self, timeout_sec: float = CLOSE_TIMEOUT_SEC) -> None:
        """Flush what is queued and stop exporting, within ``timeout_sec``.

        The flush runs on a daemon thread: past ``timeout_sec`` it is left behind (what it
        still holds is dropped, with one warning) and never delays the process's exit.
        """
        providers, self._providers = self._providers, []
        self._log = self._tracer = None
        self.enabled = False
        if not providers:
            return
        deadline_millis = int(timeout_sec * 1000)

        def flush_and_stop() -> None:
            for provider in providers:
                provider.force_flush(timeout_millis=deadline_millis)
                provider.shutdown()

        closing = threading.Thread(target=flush_and_stop, name="osmosis-otlp-close", daemon=True)
        closing.start()
        closing.join(timeout_sec)
        if closing.is_alive():
            logger.warning(
                "the OTLP collector at %s did not answer within %gs: the rollout events and "
                "spans still queued were dropped",
                self._endpoint,
                timeout_sec,
            )


__all__ = [
    "ENDPOINT_ENV",
    "METADATA_KEY",
    "NAMESPACE_ENV",
    "NAME_ENV",
    "SERVER_ID_ENV",
    "TRACES_ENV",
    "RolloutObservability",
]
