"""A fake OpenTelemetry collector on loopback: OTLP/HTTP logs and traces, protobuf or JSON.

``with OtlpCollector() as collector:`` serves ``POST /v1/logs`` and ``POST /v1/traces`` on
127.0.0.1 in a thread and keeps what arrived, decoded: :meth:`log_records` and :meth:`spans`
give each record with its resource and scope, attributes as a plain dict.
"""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

_KINDS: dict[str, tuple[type[Message], type[Message]]] = {
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
}


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    return None if kind is None else getattr(any_value, kind)


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


class OtlpCollector:
    """Receives OTLP/HTTP exports; what arrived stays readable after it stopped."""

    def __init__(self) -> None:
        self.requests: dict[str, list[Message]] = {"/v1/logs": [], "/v1/traces": []}
        self.content_types: set[str] = set()
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                kind = _KINDS.get(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if kind is None:
                    self.send_error(404)
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request_type, response_type = kind
                content_type = self.headers.get("Content-Type", "")
                message = request_type()
                if content_type.startswith("application/json"):
                    json_format.Parse(body, message)
                else:
                    message.ParseFromString(body)
                with collector._lock:
                    collector.requests[self.path].append(message)
                    collector.content_types.add(content_type)
                reply = response_type().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="otlp-collector", daemon=True
        )

    def __enter__(self) -> OtlpCollector:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def log_records(self) -> list[dict[str, Any]]:
        """Every log record: ``body``, ``severity_text``, ``attributes``, ``scope``, ``resource``."""
        with self._lock:
            requests = list(self.requests["/v1/logs"])
        found = []
        for request in requests:
            for resource_logs in request.resource_logs:  # type: ignore[attr-defined]
                resource = _attributes(resource_logs.resource.attributes)
                for scope_logs in resource_logs.scope_logs:
                    for record in scope_logs.log_records:
                        found.append(
                            {
                                "body": _value(record.body),
                                "severity_text": record.severity_text,
                                "attributes": _attributes(record.attributes),
                                "scope": scope_logs.scope.name,
                                "resource": resource,
                            }
                        )
        return found

    def spans(self) -> list[dict[str, Any]]:
        """Every span: ``name``, ``trace_id``, ``span_id``, ``parent_span_id`` (hex),
        ``attributes``, ``status_code``, ``resource``."""
        with self._lock:
            requests = list(self.requests["/v1/traces"])
        found = []
        for request in requests:
            for resource_spans in request.resource_spans:  # type: ignore[attr-defined]
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        found.append(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "attributes": _attributes(span.attributes),
                                "status_code": span.status.code,
                                "resource": resource,
                            }
                        )
        return found
