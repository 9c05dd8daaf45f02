"""Request parsing of the OTLP/HTTP listener, on top of the standard library's parser.

* :data:`MAX_HEADER_BYTES` and :class:`HeaderSectionReader`: a cap on the header section as a whole.
  ``http.client`` (which ``http.server`` uses to read headers) caps each line (65536 bytes) and their
  number (100), not their sum: 100 lines of 64 KiB each, about 6.5 MB per request, would be read and held.
  The reader stands in for the request's stream while the header lines are read and stops at the cap.
* :func:`body_length` / :func:`content_length`: the body's length from every ``Content-Length`` field of
  a request, refusing what RFC 9112 section 6.3 calls invalid or ambiguous framing (differing values, or
  ``Transfer-Encoding`` too: a proxy and this listener could split the same bytes into different
  requests); :func:`has_body`, for requests whose body is never read.
* :func:`route_path`: the path of a request target without its query, for routing and for messages.
* :func:`gunzip`: a ``Content-Encoding: gzip`` body, inflated within a size limit and a member count
  (:data:`MAX_GZIP_MEMBERS`).
"""

from __future__ import annotations

import io
import re
import zlib
from email.message import Message
from http import HTTPStatus
from http.client import HTTPException
from typing import Final

from google.rpc import code_pb2  # type: ignore[import-untyped,unused-ignore]

__all__ = [
    "MAX_GZIP_MEMBERS",
    "MAX_HEADER_BYTES",
    "HeaderSectionReader",
    "HeaderSectionTooLarge",
    "Refusal",
    "body_length",
    "content_length",
    "gunzip",
    "has_body",
    "quoted_path",
    "route_path",
]

#: Bytes allowed in a request's header section: its field lines and the empty line ending it (the
#: request line has its own limit, 65536 bytes). Go's ``net/http`` allows 1 MiB, nginx 32 KiB
#: (``large_client_header_buffers 4 8k``); OTLP exporters send a few short fields plus
#: ``OTEL_EXPORTER_OTLP_HEADERS``.
MAX_HEADER_BYTES: Final = 64 * 1024

_DIGITS: Final = re.compile(r"[0-9]+")
_QUOTED_PATH_CHARS: Final = 200


class HeaderSectionTooLarge(HTTPException):
    """The header section passed :data:`MAX_HEADER_BYTES`. An ``http.client.HTTPException``, which
    ``BaseHTTPRequestHandler.parse_request`` answers with 431 (as for too many header lines)."""


class HeaderSectionReader(io.BufferedIOBase):
    """Reads lines from ``stream`` until ``limit`` bytes in all have been read, then raises
    :class:`HeaderSectionTooLarge` (having read at most ``limit + 1`` bytes): the stand-in for a request's
    stream while ``http.client.parse_headers`` reads the header section, which it does by ``readline``
    alone.

    Args:
        stream: The request's buffered stream (left positioned after the last line read).
        limit: Bytes allowed in all (:data:`MAX_HEADER_BYTES`).
    """

    def __init__(self, stream: io.BufferedIOBase, limit: int = MAX_HEADER_BYTES) -> None:
        super().__init__()
        self._stream = stream
        self._left = limit

    def readable(self) -> bool:
        return True

    def readline(self, size: int | None = -1) -> bytes:
        budget = self._left + 1 if size is None or size < 0 else min(size, self._left + 1)
        line = self._stream.readline(budget)
        self._left -= len(line)
        if self._left < 0:
            raise HeaderSectionTooLarge(f"header section over {MAX_HEADER_BYTES} bytes")
        return line


class Refusal(Exception):
    """A request refused before its body is read; ``args``: the HTTP status, the ``google.rpc.Code``, the
    message and the ``ReceiverStats.requests`` outcome."""

    def __init__(self, status: HTTPStatus, code: int, message: str, outcome: str) -> None:
        super().__init__(status, code, message, outcome)


def body_length(headers: Message, limit: int) -> int:
    """The length in bytes of a request's body, from its ``headers``, at most ``limit``.

    Raises:
        Refusal: 411 ``length_required`` without ``Content-Length`` (chunked bodies are not accepted:
            RFC 9112 section 6.1 lets a server require a length); 400 ``bad_request`` with
            ``Transfer-Encoding`` too (RFC 9112 section 6.3: ambiguous framing, which a server may refuse),
            or for an invalid or conflicting value (:func:`content_length`); 413 ``too_large`` over
            ``limit``.
    """
    values = headers.get_all("Content-Length") or []
    if values and "Transfer-Encoding" in headers:
        message = "both Content-Length and Transfer-Encoding (RFC 9112 section 6.3): send Content-Length only"
        raise Refusal(HTTPStatus.BAD_REQUEST, code_pb2.INVALID_ARGUMENT, message, "bad_request")
    if not values:
        message = "Content-Length is required (chunked bodies are not accepted)"
        raise Refusal(HTTPStatus.LENGTH_REQUIRED, code_pb2.INVALID_ARGUMENT, message, "length_required")
    try:
        length = content_length(values)
    except ValueError as exc:
        raise Refusal(HTTPStatus.BAD_REQUEST, code_pb2.INVALID_ARGUMENT, str(exc), "bad_request") from None
    if length > limit:
        message = f"request body of {length} bytes exceeds the limit of {limit} bytes"
        raise Refusal(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, code_pb2.RESOURCE_EXHAUSTED, message, "too_large")
    return length


def has_body(headers: Message) -> bool:
    """Whether a request's ``headers`` announce a body (``Transfer-Encoding``, or a ``Content-Length``
    other than ``0``, valid or not)."""
    return "Transfer-Encoding" in headers or any(
        value.strip(" \t") != "0" for value in headers.get_all("Content-Length") or []
    )


def content_length(values: list[str]) -> int:
    """The body length given by a request's ``Content-Length`` field values (``values``: one per field
    line, at least one), in bytes.

    ``Content-Length = 1*DIGIT`` (RFC 9110 section 8.6), so no sign, digit separator or blank (Python's
    ``int`` takes ``+5`` and ``5_0``, which other parsers on the path may not). Repeated identical values,
    as several fields or as one comma-separated list, mean that value: RFC 9110 section 8.6 lets a
    recipient either refuse them or take the one value, and taking it frames the body as any other
    recipient would (Go's ``net/http`` does the same).

    Raises:
        ValueError: naming ``Content-Length``, when a value is not a decimal number or the values differ
            (RFC 9112 section 6.3: invalid framing, answered 400).
    """
    lengths = {item.strip(" \t") for value in values for item in value.split(",")}
    if not lengths or not all(_DIGITS.fullmatch(length) for length in lengths):
        raise ValueError("invalid Content-Length: expected one decimal number of bytes")
    if len({int(length) for length in lengths}) > 1:
        raise ValueError("conflicting Content-Length values (RFC 9112 section 6.3)")
    return int(lengths.pop())


def route_path(target: str) -> str:
    """The path of a request target (``target`` as in the request line): without its query or fragment,
    which may carry tokens or content."""
    return target.split("?", 1)[0].split("#", 1)[0]


def quoted_path(target: str) -> str:
    """:func:`route_path` of ``target`` for a message: ``repr``-quoted, at most 200 characters kept."""
    path = route_path(target)
    if len(path) > _QUOTED_PATH_CHARS:
        path = path[:_QUOTED_PATH_CHARS] + "..."
    return repr(path)


#: Gzip members one request body may hold. OTLP exporters send one; a body of many tiny members (about
#: 210,000 empty ones fit in 4 MiB) would otherwise cost one inflater and one copy of the rest per member.
MAX_GZIP_MEMBERS: Final = 64


def gunzip(body: bytes, limit: int, max_members: int = MAX_GZIP_MEMBERS) -> bytes:
    """Inflate every gzip member of ``body`` (at least one, at most ``max_members``; RFC 1952 section 2.2:
    a series of members; trailing NUL padding ignored, as Python's ``gzip`` does), stopping once more than
    ``limit`` bytes came out: a result longer than ``limit`` (``limit + 1`` bytes at most) means the body
    is over it. The work is linear in ``len(body)`` (at most ``max_members`` passes over it).

    Raises:
        ValueError: when ``body`` is not valid gzip (empty, broken or truncated) within ``limit`` bytes, or
            holds more than ``max_members`` members (the message says which).
    """
    parts: list[bytes] = []
    size, offset, complete = 0, 0, True
    view = memoryview(body)
    end = len(body.rstrip(b"\0"))  # members end here; NUL padding after
    try:
        while complete and size <= limit and (not parts or offset < end):
            if len(parts) == max_members:
                raise ValueError(f"the gzip body has more than {max_members} members")
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            parts.append(inflater.decompress(view[offset:], limit + 1 - size))
            size += len(parts[-1])
            complete = inflater.eof
            offset = len(body) - len(inflater.unused_data)
    except zlib.error:
        complete = False
    if size <= limit and not complete:
        raise ValueError("the body is not valid gzip")
    return b"".join(parts)
