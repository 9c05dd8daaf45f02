"""``ctxutil-otel serve``: an OTLP trace receiver (gRPC and HTTP/protobuf) in front of the span processor.

The scale-out path (DESIGN.md, "Where users outgrow one process"): applications export traces to an
OpenTelemetry Collector; its ``loadbalancing`` exporter (routing key ``traceID``) spreads them over N
replicas of this receiver; each replica feeds the spans to a
:class:`~ctxutil_otel.capture.spans.UtilizationSpanProcessor` and exports its evaluation spans, events and
metrics over OTLP (``OTEL_EXPORTER_OTLP_ENDPOINT``). See examples/serve_behind_collector.md.

* :class:`TraceReceiver`: the listeners, request handling, back-pressure and graceful
  :meth:`~TraceReceiver.stop` (receiver: ``ctxutil_otel.serve._server``; request handling and the OTLP
  specification sections it follows: ``ctxutil_otel.serve._export``).
* :func:`serve_until_signal`: run until SIGTERM/SIGINT, then stop gracefully (the CLI uses it).
* :func:`convert_request`: ``ExportTraceServiceRequest`` -> SDK ``ReadableSpan`` objects.
"""

from __future__ import annotations

from ._convert import Conversion, InvalidSpanError, attributes_from, convert_request, convert_span
from ._export import ExportResult
from ._http import HEALTH_PATH, TRACES_PATH
from ._limits import HEALTH_RESERVED_CONNECTIONS
from ._server import (
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_REQUEST_TIMEOUT_S,
    ReceiverStats,
    TLSFiles,
    TraceReceiver,
)
from ._signals import serve_until_signal

__all__ = [
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "HEALTH_PATH",
    "HEALTH_RESERVED_CONNECTIONS",
    "TRACES_PATH",
    "Conversion",
    "ExportResult",
    "InvalidSpanError",
    "ReceiverStats",
    "TLSFiles",
    "TraceReceiver",
    "attributes_from",
    "convert_request",
    "convert_span",
    "serve_until_signal",
]
