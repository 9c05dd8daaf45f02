"""OTLP/gRPC listener: ``opentelemetry.proto.collector.trace.v1.TraceService/Export`` on ``grpcio``.

Only the trace service is registered: calls to the metrics and logs services get ``UNIMPLEMENTED`` from
gRPC itself (send traces only to this receiver).

The method is registered with raw-bytes (de)serialisation (service and method names from the
``opentelemetry-proto`` descriptor), so that the bearer token is checked before the body is parsed, and
an undecodable body is answered ``INVALID_ARGUMENT`` (the OTLP spec's not-retryable code) rather than the
``INTERNAL`` grpcio gives to a failing deserializer. Answers (OpenTelemetry protocol specification,
``specification/protocol/otlp.md``, "OTLP/gRPC Response", "Failures", "OTLP/gRPC Throttling"):

* ``OK`` with an ``ExportTraceServiceResponse`` (``partial_success`` set when spans were rejected);
* ``UNAUTHENTICATED``: missing or wrong ``authorization: Bearer <token>`` metadata;
* ``INVALID_ARGUMENT`` (with a ``BadRequest`` detail): undecodable body, or no span convertible;
* ``RESOURCE_EXHAUSTED``: a message larger than ``max_request_bytes`` (gRPC's
  ``grpc.max_receive_message_length``; gzip-compressed messages are decompressed by gRPC, which applies
  the limit to the decompressed size), or more than ``max_connections`` concurrent calls (gRPC's
  ``maximum_concurrent_rpcs``);
* ``UNAVAILABLE`` with ``google.rpc.RetryInfo`` (``retry_after_s``): the evaluator's queue is full, or the
  receiver is shutting down. ``RetryInfo`` travels in the standard ``grpc-status-details-bin`` trailer (a
  ``google.rpc.Status``) and in ``google.rpc.retryinfo-bin``, the trailer the OpenTelemetry Python exporter
  reads;
* ``INTERNAL``: a bug (logged once).

Health: when ``grpcio-health-checking`` is installed, the standard ``grpc.health.v1.Health`` service is
registered too (status ``SERVING``, ``NOT_SERVING`` once stopping is not tracked: probe HTTP ``/healthz``
for that). Without it, probe the HTTP ``/healthz`` endpoint.
"""

from __future__ import annotations

import logging
from concurrent import futures
from typing import TYPE_CHECKING, Any, Final

import grpc  # type: ignore[import-untyped,unused-ignore]
from google.rpc import code_pb2  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ._status import bad_request, retry_info, status_body

if TYPE_CHECKING:
    from ._server import TraceReceiver

__all__ = ["EXPORT_METHOD", "SERVICE_NAME", "start_grpc_server"]

_log = logging.getLogger("ctxutil_otel.serve")

#: ``opentelemetry.proto.collector.trace.v1.TraceService``, from the opentelemetry-proto descriptor.
SERVICE_NAME: Final[str] = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
EXPORT_METHOD: Final = "Export"
_RETRY_INFO_KEY: Final = "google.rpc.retryinfo-bin"
_STATUS_DETAILS_KEY: Final = "grpc-status-details-bin"


def _retry_trailers(seconds: int, message: str) -> tuple[tuple[str, bytes], ...]:
    info = retry_info(seconds)
    details = status_body(code_pb2.UNAVAILABLE, message, info)
    return ((_STATUS_DETAILS_KEY, details), (_RETRY_INFO_KEY, info.SerializeToString()))


def _bad_request_trailers(message: str) -> tuple[tuple[str, bytes], ...]:
    bad = bad_request(message, "request")
    return ((_STATUS_DETAILS_KEY, status_body(code_pb2.INVALID_ARGUMENT, message, bad)),)


def _authorization(context: Any) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return str(value)
    return None


def _export_handler(receiver: TraceReceiver) -> Any:
    def export(request: bytes, context: Any) -> bytes:
        if not receiver.authorized(_authorization(context)):
            receiver.count("unauthenticated")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
        result = receiver.export(request)
        if result.outcome in ("ok", "partial"):
            return result.response
        if result.outcome == "bad_request":
            context.set_trailing_metadata(_bad_request_trailers(result.message))
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, result.message)
        if result.outcome in ("overloaded", "unavailable"):
            context.set_trailing_metadata(_retry_trailers(receiver.retry_after_s, result.message))
            context.abort(grpc.StatusCode.UNAVAILABLE, result.message)
        context.abort(grpc.StatusCode.INTERNAL, result.message)
        raise AssertionError("unreachable: context.abort raises")  # pragma: no cover

    return grpc.unary_unary_rpc_method_handler(export, request_deserializer=None, response_serializer=None)


def _add_health(server: Any) -> bool:
    """Register ``grpc.health.v1.Health`` when ``grpcio-health-checking`` is installed."""
    try:
        from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # type: ignore[import-untyped,import-not-found,unused-ignore]
    except ImportError:
        return False
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    servicer.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    return True


def start_grpc_server(receiver: TraceReceiver, port: int) -> tuple[Any, int]:
    """Bind ``receiver.host:port`` (TLS when configured) and start; returns the ``grpc.Server`` and the
    bound port.

    Raises:
        OSError: when the port cannot be bound or a TLS file cannot be read.
    """
    limit = receiver.max_request_bytes
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="ctxutil-serve-grpc"),
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=receiver.max_connections,
    )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE_NAME, {EXPORT_METHOD: _export_handler(receiver)}),)
    )
    _add_health(server)
    address = receiver.address(port)
    try:
        if receiver.tls is not None:
            key, cert = receiver.tls.read()
            bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
        else:
            bound = server.add_insecure_port(address)
    except RuntimeError as exc:  # grpcio raises RuntimeError("Failed to bind ...")
        server.stop(None)
        raise OSError(f"cannot bind the OTLP/gRPC listener to {address}: {exc}") from None
    except BaseException:
        server.stop(None)
        raise
    if not bound:
        server.stop(None)
        raise OSError(f"cannot bind the OTLP/gRPC listener to {address}")
    server.start()
    return server, int(bound)
