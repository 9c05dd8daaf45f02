"""A real OTLP receiver for tests: gRPC and HTTP/protobuf on 127.0.0.1, decoding with opentelemetry-proto.

Collects every exported span, log record and metric so a test can assert on what a process delivered
over the wire. Usage::

    with OTLPReceiver() as receiver:                # starts gRPC and HTTP servers on free ports
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_endpoint}      # or receiver.http_endpoint
        ...                                           # run the exporting code
        receiver.wait_for(lambda r: len(r.spans("contextual_utilization")) >= 3, timeout_s=20)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["OTLPReceiver", "attributes_of"]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def attributes_of(message: Any) -> dict[str, Any]:
    """The ``attributes`` of a decoded OTLP message (span, log record, data point) as a plain dict."""
    return {kv.key: _value(kv.value) for kv in message.attributes}


class OTLPReceiver:
    """Receives OTLP traces, metrics and logs over gRPC and HTTP/protobuf; thread-safe collections."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self.trace_requests: list[trace_service_pb2.ExportTraceServiceRequest] = []
        self.metric_requests: list[metrics_service_pb2.ExportMetricsServiceRequest] = []
        self.log_requests: list[logs_service_pb2.ExportLogsServiceRequest] = []
        self.transports: list[str] = []
        self._grpc: grpc.Server | None = None
        self._http: ThreadingHTTPServer | None = None
        self.grpc_port = 0
        self.http_port = 0

    # --- collection -----------------------------------------------------------------------------
    def _add(self, kind: str, request: Any, transport: str) -> None:
        with self._lock:
            getattr(self, f"{kind}_requests").append(request)
            self.transports.append(transport)
            self._lock.notify_all()

    def spans(self, name: str | None = None) -> list[Any]:
        """Every received ``opentelemetry.proto.trace.v1.Span``, optionally only those named ``name``."""
        with self._lock:
            requests = list(self.trace_requests)
        return [
            span
            for request in requests
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
            if name is None or span.name == name
        ]

    def log_records(self) -> list[Any]:
        with self._lock:
            requests = list(self.log_requests)
        return [
            rec for r in requests for rl in r.resource_logs for sl in rl.scope_logs for rec in sl.log_records
        ]

    def metrics(self, name: str) -> list[Any]:
        """Every received metric message named ``name`` (one per export)."""
        with self._lock:
            requests = list(self.metric_requests)
        return [
            m
            for r in requests
            for rm in r.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == name
        ]

    def resources(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            requests = list(self.trace_requests)
        for request in requests:
            for rs in request.resource_spans:
                yield attributes_of(rs.resource)

    def wait_for(self, predicate: Callable[[OTLPReceiver], bool], timeout_s: float = 20.0) -> bool:
        """Block until ``predicate(self)`` holds or ``timeout_s`` passes (woken on every request)."""
        with self._lock:
            return self._lock.wait_for(lambda: predicate(self), timeout=timeout_s)

    # --- servers --------------------------------------------------------------------------------
    @property
    def grpc_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> OTLPReceiver:
        receiver = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                receiver._add("trace", request, "grpc")
                return trace_service_pb2.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                receiver._add("metric", request, "grpc")
                return metrics_service_pb2.ExportMetricsServiceResponse()

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                receiver._add("log", request, "grpc")
                return logs_service_pb2.ExportLogsServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
        self.grpc_port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc = server

        routes: dict[str, tuple[str, Any, Any]] = {
            "/v1/traces": (
                "trace",
                trace_service_pb2.ExportTraceServiceRequest,
                trace_service_pb2.ExportTraceServiceResponse,
            ),
            "/v1/metrics": (
                "metric",
                metrics_service_pb2.ExportMetricsServiceRequest,
                metrics_service_pb2.ExportMetricsServiceResponse,
            ),
            "/v1/logs": (
                "log",
                logs_service_pb2.ExportLogsServiceRequest,
                logs_service_pb2.ExportLogsServiceResponse,
            ),
        }

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                route = routes.get(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if route is None or self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(404 if route is None else 415)
                    self.end_headers()
                    return
                kind, request_type, response_type = route
                request = request_type()
                request.ParseFromString(body)
                receiver._add(kind, request, "http")
                payload = response_type().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return

        http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        http.daemon_threads = True
        self.http_port = http.server_address[1]
        threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._http = http
        return self

    def stop(self) -> None:
        if self._grpc is not None:
            self._grpc.stop(grace=None)
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()

    def __enter__(self) -> OTLPReceiver:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
