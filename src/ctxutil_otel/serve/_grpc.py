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
* ``CANCELLED``: no request message within ``request_timeout_s`` of the call's start (counted
  ``incomplete``): a call that sends headers and then nothing holds a worker thread that long at most;
  there is a worker for each of the ``max_connections`` concurrent calls, and ``/healthz`` answers 503
  while all of them are taken;
* ``INTERNAL``: a bug (logged once).

Health: when ``grpcio-health-checking`` is installed, the standard ``grpc.health.v1.Health`` service is
registered too (status ``SERVING``, ``NOT_SERVING`` once stopping is not tracked: probe HTTP ``/healthz``
for that). Without it, probe the HTTP ``/healthz`` endpoint.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import TYPE_CHECKING, Any, Final

import grpc  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from ._limits import CallDeadlines
from ._status import invalid, retry_info, unavailable

if TYPE_CHECKING:
    from ._types import Receiver

__all__ = ["EXPORT_METHOD", "SERVICE_NAME", "GrpcListener", "start_grpc_server"]

_log = logging.getLogger("ctxutil_otel.serve")

#: ``opentelemetry.proto.collector.trace.v1.TraceService``, from the opentelemetry-proto descriptor.
SERVICE_NAME: Final[str] = trace_service_pb2.DESCRIPTOR.services_by_name["TraceService"].full_name
EXPORT_METHOD: Final = "Export"
_RETRY_INFO_KEY: Final = "google.rpc.retryinfo-bin"
_STATUS_DETAILS_KEY: Final = "grpc-status-details-bin"


def _retry_trailers(seconds: int, message: str) -> tuple[tuple[str, bytes], ...]:
    details = unavailable(message, seconds)
    info = retry_info(seconds)
    return ((_STATUS_DETAILS_KEY, details.SerializeToString()), (_RETRY_INFO_KEY, info.SerializeToString()))


def _bad_request_trailers(message: str) -> tuple[tuple[str, bytes], ...]:
    return ((_STATUS_DETAILS_KEY, invalid(message, "request").SerializeToString()),)


def _authorization(context: Any) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization":
            return str(value)
    return None


class _Calls:
    """The calls in progress (for ``/healthz``) and their request deadlines."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.deadlines = CallDeadlines("ctxutil-serve-grpc-deadlines")
        self._lock = threading.Lock()
        self.in_progress = 0

    def enter(self) -> None:
        with self._lock:
            self.in_progress += 1

    def leave(self) -> None:
        with self._lock:
            self.in_progress -= 1

    def saturated(self) -> bool:
        return self.in_progress >= self.capacity


def _export_handler(receiver: Receiver, calls: _Calls) -> Any:
    # Registered as stream-unary (the same bytes on the wire as the exporters' unary call): the handler
    # runs as the call arrives, before its message, so the message is read here under the receiver's
    # request_timeout_s. grpcio's unary handlers read it in the worker thread with no bound: eight calls
    # that sent headers and then nothing held every worker (issue 10 item 3).
    def export(requests: Iterator[bytes], context: Any) -> bytes:
        calls.enter()
        try:
            return _export(requests, context)
        finally:
            calls.leave()

    def _export(requests: Iterator[bytes], context: Any) -> bytes:
        if not receiver.authorized(_authorization(context)):
            receiver.count("unauthenticated")
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
        handle = calls.deadlines.arm(context.cancel, receiver.request_timeout_s)
        try:
            request = next(requests, None)
        except grpc.RpcError:  # cancelled: the deadline passed, or the sender went away
            request = None
        in_time = calls.deadlines.disarm(handle)
        if request is None:
            receiver.count("incomplete")
            _log.debug(
                "ctxutil serve: gRPC call without a request message (deadline passed: %s)", not in_time
            )
            context.abort(grpc.StatusCode.CANCELLED, "no request message within the request deadline")
            raise AssertionError("unreachable: context.abort raises")  # pragma: no cover
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

    return grpc.stream_unary_rpc_method_handler(export, request_deserializer=None, response_serializer=None)


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


class GrpcListener:
    """The running ``grpc.Server`` and its calls in progress."""

    def __init__(self, server: Any, calls: _Calls, executor: futures.ThreadPoolExecutor) -> None:
        self.server = server
        self._calls = calls
        self._executor = executor

    def problem(self) -> str | None:
        """Why the listener cannot take a call now (every call slot busy), else ``None``."""
        if self._calls.saturated():
            return (
                f"OTLP/gRPC listener saturated: {self._calls.in_progress} of {self._calls.capacity} calls "
                "in progress (stalled or slow senders until their request deadline)"
            )
        return None

    def stop(self, grace_s: float) -> Any:
        """``grpc.Server.stop``; returns its event. Calls still waiting for their message are cancelled."""
        stopped = self.server.stop(grace_s)
        self._calls.deadlines.close()
        self._executor.shutdown(wait=False)  # its idle workers end; grpcio leaves them waiting otherwise
        return stopped


def start_grpc_server(receiver: Receiver, port: int) -> tuple[GrpcListener, int]:
    """Bind ``receiver.host:port`` (TLS when configured) and start; returns the listener and the bound
    port.

    Raises:
        OSError: when the port cannot be bound or a TLS file cannot be read.
    """
    limit = receiver.max_request_bytes
    calls = _Calls(receiver.max_connections)
    # A thread for every admitted call: none waits in the executor's queue behind stalled ones.
    executor = futures.ThreadPoolExecutor(
        max_workers=receiver.max_connections, thread_name_prefix="ctxutil-serve-grpc"
    )
    server = grpc.server(
        executor,
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", 1024 * 1024),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=receiver.max_connections,
    )
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                SERVICE_NAME, {EXPORT_METHOD: _export_handler(receiver, calls)}
            ),
        )
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
    return GrpcListener(server, calls, executor), int(bound)
