"""One OTLP trace export, handled the same on both transports: the bearer-token check, decoding,
back-pressure, conversion and feeding the span processor, and the transport-neutral answer
(:class:`ExportResult`) that :mod:`._grpc` and :mod:`._http` render.

Request handling (OpenTelemetry protocol specification, ``specification/protocol/otlp.md``, sections
"OTLP/gRPC Response" / "Failures" / "OTLP/gRPC Throttling" and "OTLP/HTTP Response" / "Failures" / "Bad
Data" / "OTLP/HTTP Throttling"):

1. Bearer token (when configured): ``Authorization: Bearer <token>`` (HTTP header, gRPC metadata
   ``authorization``), compared with ``hmac.compare_digest``; missing or wrong -> HTTP 401 / gRPC
   ``UNAUTHENTICATED`` (not retryable). Checked before the body is parsed. The token is never logged or
   echoed.
2. Size: at most ``max_request_bytes`` (default 16 MiB, after gzip decompression on HTTP) -> HTTP 413 /
   gRPC ``RESOURCE_EXHAUSTED`` without ``RetryInfo`` (not retryable: the same request would fail again).
3. Decoding: a body that is not an ``ExportTraceServiceRequest`` protobuf -> HTTP 400 with a
   ``google.rpc.Status`` body carrying ``BadRequest`` / gRPC ``INVALID_ARGUMENT`` (the spec's "Bad Data":
   the client MUST NOT retry). Spans that decode but cannot be represented (bad id lengths) are rejected
   one by one: a *partial success* (``rejected_spans``, ``error_message``; HTTP 200 / gRPC OK) when others
   were accepted, "Bad Data" when none were.
4. Back-pressure (decided): when the evaluator's queue is full (``queue_size >= max_queue_size``) as the
   request arrives, the whole request is refused with the spec's retryable throttling answer: HTTP 503
   ``Service Unavailable`` with ``Retry-After: <retry_after_s>`` and a ``Status`` body carrying
   ``google.rpc.RetryInfo``; gRPC ``UNAVAILABLE`` with ``RetryInfo`` (the spec: "To signal backpressure
   when using gRPC transport, the server MUST return an error with code Unavailable"), in the standard
   ``grpc-status-details-bin`` trailer and in ``google.rpc.retryinfo-bin``, the trailer the OpenTelemetry
   Python exporter reads. Why refuse rather than answer a partial success: the queue only holds sampled
   RAG turns, and a partial success MUST NOT be retried, so the turns would be lost; refused, they stay in
   the sender's (Collector's) retry queue until the evaluator has room, and nothing is processed twice
   (the refusal happens before any span is fed). 503 rather than 429 because the server, not the client,
   is the limit. A request admitted while the queue is almost full may still have turns dropped with
   reason ``queue_full`` (counted by the evaluator). While shutting down: the same 503 / ``UNAVAILABLE``.
5. Otherwise every span is converted (:mod:`._convert`) and fed to ``processor.on_end``, and the answer
   (``ExportTraceServiceResponse``) goes back at once: evaluation is asynchronous.

Steps 1, 3, 4 (queue full) and 5 live here; step 2 is each transport's (:mod:`._grpc`, :mod:`._http`),
and the shutdown refusal of step 4 is the receiver's (:class:`~ctxutil_otel.serve.TraceReceiver`).
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from google.protobuf.message import DecodeError  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ._convert import convert_request
from ._json import from_json, to_json

if TYPE_CHECKING:
    from ..capture.spans import UtilizationSpanProcessor

__all__ = ["Encoding", "ExportResult", "Outcome", "bearer_authorized", "export_request"]

_log = logging.getLogger("ctxutil_otel.serve")

Outcome = Literal["ok", "partial", "bad_request", "overloaded", "unavailable", "internal"]
#: The body's encoding: binary protobuf, or OTLP/JSON.
Encoding = Literal["protobuf", "json"]


@dataclass(frozen=True)
class ExportResult:
    """The receiver's answer to one export, before a transport renders it.

    Attributes:
        outcome: ``ok`` / ``partial`` (answered with an ``ExportTraceServiceResponse``), ``bad_request``
            (not retryable), ``overloaded`` / ``unavailable`` (retryable after ``retry_after_s``),
            ``internal`` (a bug; logged).
        response: The serialized ``ExportTraceServiceResponse`` for ``ok`` and ``partial``.
        message: A developer-facing English message for failures and partial successes.
        accepted / rejected: Spans fed to the processor / rejected as malformed.
    """

    outcome: Outcome
    response: bytes = b""
    message: str = ""
    accepted: int = 0
    rejected: int = 0


def bearer_authorized(token: bytes | None, authorization: str | None) -> bool:
    """Whether an ``Authorization`` value (``"Bearer <token>"``, scheme case-insensitive) carries ``token``
    (ASCII bytes); always ``True`` when ``token`` is ``None`` (no check configured). Constant-time
    comparison (``hmac.compare_digest``)."""
    if token is None:
        return True
    if not authorization:
        return False
    scheme, _, presented = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode("ascii", "replace"), token)


def export_request(
    payload: bytes,
    processor: UtilizationSpanProcessor,
    *,
    overloaded: Callable[[], bool],
    max_queue_size: int,
    encoding: Encoding = "protobuf",
) -> ExportResult:
    """Decode one ``ExportTraceServiceRequest`` body (uncompressed; binary protobuf, or OTLP/JSON with
    ``encoding="json"``: :mod:`._json`, the answer then in JSON too), refuse it as
    ``overloaded`` when ``overloaded()`` says the evaluator's queue (``max_queue_size`` interactions, for
    the message) is full, else convert its spans and feed them to ``processor.on_end`` (steps 3 to 5 of
    the module docstring). Raises only on a bug (the receiver answers ``internal``)."""
    request = ExportTraceServiceRequest()
    if encoding == "json":
        try:
            request = from_json(payload)
        except ValueError as exc:
            _log.debug("ctxutil serve: undecodable OTLP/JSON export")
            return ExportResult("bad_request", message=f"OTLP/JSON: {exc}")
    else:
        try:
            request.ParseFromString(payload)
        except (DecodeError, ValueError, RuntimeError) as exc:
            _log.debug("ctxutil serve: undecodable export (%s)", type(exc).__name__)
            message = "the body is not an ExportTraceServiceRequest protobuf"
            return ExportResult("bad_request", message=message)
    if overloaded():
        return ExportResult(
            "overloaded",
            message=f"the evaluator queue is full ({max_queue_size} interactions); retry later",
        )
    conversion = convert_request(request)
    if conversion.rejected and not conversion.spans:
        return ExportResult("bad_request", message=conversion.error_message(), rejected=conversion.rejected)
    on_end = processor.on_end
    for span in conversion.spans:
        on_end(span)
    response = ExportTraceServiceResponse()
    if conversion.rejected:
        response.partial_success.rejected_spans = conversion.rejected
        response.partial_success.error_message = conversion.error_message()
        _log.debug("ctxutil serve: %s", conversion.error_message())
    return ExportResult(
        "partial" if conversion.rejected else "ok",
        response=to_json(response) if encoding == "json" else response.SerializeToString(),
        message=conversion.error_message(),
        accepted=len(conversion.spans),
        rejected=conversion.rejected,
    )
