"""``ctxutil-otel serve``: an OTLP trace receiver (gRPC, HTTP/protobuf and HTTP/JSON) in front of the span
processor.

The scale-out path (DESIGN.md, "Where users outgrow one process"): applications export traces to an
OpenTelemetry Collector; its ``loadbalancing`` exporter (routing key ``traceID``) spreads them over N
replicas of this receiver; each replica feeds the spans to a
:class:`~ctxutil_otel.capture.spans.UtilizationSpanProcessor` and exports its evaluation spans, events and
metrics over OTLP (``OTEL_EXPORTER_OTLP_ENDPOINT``). See examples/serve_behind_collector.md.

* :class:`TraceReceiver`: the listeners, request handling, back-pressure and graceful
  :meth:`~TraceReceiver.stop` (receiver: ``ctxutil_otel.serve._server``; request handling and the OTLP
  specification sections it follows: ``ctxutil_otel.serve._export``).
* :func:`serve_until_signal`: run until SIGTERM/SIGINT, then stop gracefully (the CLI uses it).
* :class:`TLSFiles`, :class:`ReceiverStats`; :data:`TRACES_PATH`, :data:`HEALTH_PATH` and
  :data:`HEALTH_RESERVED_CONNECTIONS` (the HTTP routes and the slots kept for probes). The defaults of
  the receiver's bounds are its signature's.
"""

from __future__ import annotations

from ._http import HEALTH_PATH, TRACES_PATH
from ._limits import HEALTH_RESERVED_CONNECTIONS
from ._server import ReceiverStats, TraceReceiver
from ._signals import serve_until_signal
from ._types import TLSFiles

__all__ = [
    "HEALTH_PATH",
    "HEALTH_RESERVED_CONNECTIONS",
    "TRACES_PATH",
    "ReceiverStats",
    "TLSFiles",
    "TraceReceiver",
    "serve_until_signal",
]
