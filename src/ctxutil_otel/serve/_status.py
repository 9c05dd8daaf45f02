"""``google.rpc.Status`` answers shared by both listeners, and the server's TLS context.

The OTLP specification (``specification/protocol/otlp.md``, "Failures") has HTTP error bodies carry a
protobuf ``google.rpc.Status`` and gRPC errors carry one in the ``grpc-status-details-bin`` trailer, with
``google.rpc.RetryInfo`` for retryable throttling and ``google.rpc.BadRequest`` for bad data
(``google/rpc/error_details.proto``).
"""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

from google.protobuf.any_pb2 import Any as AnyProto  # type: ignore[import-untyped,unused-ignore]
from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped,unused-ignore]

if TYPE_CHECKING:
    from ._server import TLSFiles

__all__ = ["bad_request", "os_error", "retry_info", "ssl_context", "status_body"]


def status_body(code: int, message: str, *details: Any) -> bytes:
    """A serialized ``google.rpc.Status`` (``code`` a ``google.rpc.Code`` value) with packed details."""
    status = status_pb2.Status(code=code, message=message)
    for detail in details:
        packed = AnyProto()
        packed.Pack(detail)
        status.details.append(packed)
    return bytes(status.SerializeToString())


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
