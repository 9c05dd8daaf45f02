"""``google.rpc.Status`` answers shared by both listeners, and the server's TLS context.

The OTLP specification (``specification/protocol/otlp.md``, "Failures") has HTTP error bodies carry a
protobuf ``google.rpc.Status`` and gRPC errors carry one in the ``grpc-status-details-bin`` trailer, with
``google.rpc.RetryInfo`` for retryable throttling and ``google.rpc.BadRequest`` for bad data
(``google/rpc/error_details.proto``). :func:`parser_error` renders the errors the standard library's HTTP
request parser finds the same way.
"""

from __future__ import annotations

import ssl
from http import HTTPStatus
from typing import TYPE_CHECKING, Any, Final

from google.protobuf.any_pb2 import Any as AnyProto  # type: ignore[import-untyped,unused-ignore]
from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped,unused-ignore]

from ._parsing import MAX_HEADER_BYTES

if TYPE_CHECKING:
    from ._types import TLSFiles

__all__ = [
    "bad_request",
    "invalid",
    "os_error",
    "parser_error",
    "retry_info",
    "ssl_context",
    "status",
    "unavailable",
]

# HTTP status -> (google.rpc.Code, message, ReceiverStats outcome). The limits are http.server's (request
# line), http.client's (each header line, 65536 bytes: under the total; at most 100 header lines) and the
# listener's own on the whole header section (._parsing.MAX_HEADER_BYTES).
_PARSER_ERRORS: Final[dict[int, tuple[int, str, str]]] = {
    400: (
        code_pb2.INVALID_ARGUMENT,
        "malformed HTTP request line: expected METHOD /path HTTP/1.1",
        "bad_request",
    ),
    414: (code_pb2.RESOURCE_EXHAUSTED, "request line too long: at most 65536 bytes", "too_large"),
    431: (
        code_pb2.RESOURCE_EXHAUSTED,
        f"request headers too large: at most {MAX_HEADER_BYTES} bytes in all, in at most 100 lines",
        "too_large",
    ),
    501: (
        code_pb2.UNIMPLEMENTED,
        "unsupported method: OTLP/HTTP exports are POST requests (health probes: GET)",
        "not_implemented",
    ),
    505: (
        code_pb2.UNIMPLEMENTED,
        "unsupported HTTP version: this OTLP/HTTP port speaks HTTP/1.1; OTLP/gRPC has its own port",
        "not_implemented",
    ),
}


def status(code: int, message: str, *details: Any) -> status_pb2.Status:
    """A ``google.rpc.Status`` (``code`` a ``google.rpc.Code`` value) with packed details."""
    answer = status_pb2.Status(code=code, message=message)
    for detail in details:
        packed = AnyProto()
        packed.Pack(detail)
        answer.details.append(packed)
    return answer


def unavailable(message: str, retry_after_s: int) -> status_pb2.Status:
    """The retryable refusal of both transports (queue full, shutting down, a slot kept for probes):
    ``UNAVAILABLE`` with ``RetryInfo`` (OTLP "Throttling")."""
    return status(code_pb2.UNAVAILABLE, message, retry_info(retry_after_s))


def invalid(message: str, field: str) -> status_pb2.Status:
    """The not-retryable bad-data answer of both transports: ``INVALID_ARGUMENT`` with a ``BadRequest``
    naming ``field`` (``body`` on HTTP, ``request`` on gRPC)."""
    return status(code_pb2.INVALID_ARGUMENT, message, bad_request(message, field))


def parser_error(status: int) -> tuple[int, str, str]:
    """``(code, message, outcome)`` for an HTTP error ``status`` (400-599) that the standard library's
    request parser answers itself (``BaseHTTPRequestHandler.send_error``): the ``google.rpc.Code``, a message
    that never quotes the request, and the ``ReceiverStats.requests`` outcome.

    Codes per the HTTP mappings in ``google/rpc/code.proto``: 400 ``INVALID_ARGUMENT`` (``bad_request``);
    501 (unknown method) and 505 (e.g. HTTP/2: an OTLP/gRPC exporter at this port) ``UNIMPLEMENTED``
    (``not_implemented``); 414 and 431 (request line or headers over the parser's limits) are size limits
    like the 413 for the body: ``RESOURCE_EXHAUSTED`` (``too_large``), also gRPC's code for metadata over
    its limit. (OTLP/HTTP senders decide retries on the HTTP status, and 414/431 are not retryable.) Any
    other status: 4xx ``INVALID_ARGUMENT`` (``bad_request``), 5xx ``INTERNAL`` (``internal``), with the
    status's standard phrase.

    Raises:
        ValueError: when ``status`` is not an HTTP status code.
    """
    known = _PARSER_ERRORS.get(status)
    if known is not None:
        return known
    phrase = HTTPStatus(status).phrase
    if status < 500:
        return code_pb2.INVALID_ARGUMENT, phrase, "bad_request"
    return code_pb2.INTERNAL, phrase, "internal"


def retry_info(seconds: int) -> error_details_pb2.RetryInfo:
    """``google.rpc.RetryInfo`` telling the sender to wait ``seconds`` before retrying."""
    info = error_details_pb2.RetryInfo()
    info.retry_delay.seconds = seconds
    return info


def bad_request(message: str, field: str) -> error_details_pb2.BadRequest:
    """``google.rpc.BadRequest``, one field violation (``field``: ``body`` on HTTP, ``request`` on gRPC)."""
    bad = error_details_pb2.BadRequest()
    violation = bad.field_violations.add()
    violation.field = field
    violation.description = message
    return bad


def os_error(cause: OSError, message: str) -> OSError:
    """An ``OSError`` whose text is ``message`` alone (no ``[Errno n]`` prefix), keeping ``errno``."""
    error = OSError(message)
    error.errno = cause.errno
    return error


def ssl_context(tls: TLSFiles) -> ssl.SSLContext:
    """A server ``SSLContext`` (TLS 1.2+) holding the certificate chain and key.

    Raises:
        OSError: naming the file, when one cannot be read.
        ValueError: naming both files, when they are not a usable PEM certificate/key pair.
    """
    for path in (tls.cert_file, tls.key_file):
        try:
            path.open("rb").close()
        except OSError as exc:
            raise os_error(exc, f"TLS: cannot read {path}: {exc.strerror or exc}") from None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(str(tls.cert_file), str(tls.key_file))
    except ssl.SSLError as exc:
        # ``reason`` is None when OpenSSL found no PEM block at all (e.g. a DER or text file).
        why = exc.reason or "not a PEM certificate chain and PEM private key"
        message = f"TLS: cannot use certificate {tls.cert_file} with key {tls.key_file}: {why}"
        raise ValueError(message) from None
    return context
