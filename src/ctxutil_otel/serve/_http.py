"""OTLP/HTTP listener: ``POST /v1/traces`` with binary protobuf or OTLP/JSON bodies, and ``GET /healthz``.

Routes and answers (OpenTelemetry protocol specification, ``specification/protocol/otlp.md``, "OTLP/HTTP"):

* ``POST /v1/traces``, ``Content-Type: application/x-protobuf`` or ``application/json`` (OTLP/JSON:
  :mod:`._json`; every answer, errors included, then in JSON) (parameters allowed), optionally
  ``Content-Encoding: gzip`` (the spec: servers MUST support ``none`` and ``gzip``; every member of a
  multi-member body is inflated, RFC 1952 section 2.2): 200 with an
  ``ExportTraceServiceResponse`` (``partial_success`` set when spans were rejected).
* Errors carry a protobuf ``google.rpc.Status`` body (``Content-Type: application/x-protobuf``), as the
  spec requires for every 4xx/5xx: 400 undecodable body or bad gzip (``BadRequest`` detail), or invalid,
  differing or ``Transfer-Encoding``-accompanied ``Content-Length`` (:func:`._parsing.body_length`); 401
  missing or wrong bearer token (``WWW-Authenticate: Bearer``); 405 with ``Allow`` for ``GET /v1/traces``
  and ``POST /healthz``; 404 any other path, quoted without its
  query (``/v1/metrics`` and ``/v1/logs`` too: this receiver takes traces only); 411 no ``Content-Length``
  (chunked bodies are not accepted); 413 body larger than ``max_request_bytes`` (checked on
  ``Content-Length`` before reading, and on the decompressed size); 415 any other content type or encoding
  ; 503 with
  ``Retry-After`` and ``RetryInfo`` when the evaluator's queue is full or the receiver is shutting down
  (retryable); 500 on a bug. The requests the standard library's parser refuses itself get the same kind
  of answer, counted and never quoting the request (:func:`._status.parser_error`): 400 malformed or blank
  request line (one empty line before it is ignored, RFC 9112 section 2.2) or header line; 414 / 431
  request line or headers over the limits (the header section also in all, :data:`._parsing.MAX_HEADER_BYTES`,
  refused once read that far); 501 any method but GET and POST (HEAD: the same head, no body); 505 HTTP/2+.
* ``GET /healthz``: ``200 ok`` while accepting with every listener able to serve; else 503 with the
  reason as the body (``shutting down``; the OTLP/gRPC listener saturated by calls in progress; a listener
  thread gone); no token needed (for probes).
  This is the endpoint to probe: the gRPC health service is registered only when ``grpcio-health-checking``
  is installed. A GET announcing a body is answered, then its connection closed (the body is not read).

Connections (:mod:`._limits`): each connection runs in its own (daemon) thread. Every request must
deliver its request line and headers within ``header_timeout_s`` (default 10 s; this is also how long an
idle keep-alive connection is kept), then its body within ``request_timeout_s`` (default 30 s), each a total
deadline however slowly the bytes trickle in. A connection that sends nothing in time is closed silently; a
sender that stalls or disconnects mid-request gets its connection closed without an answer (counted
``incomplete``). At most ``max_connections`` connections are served at once, plus
:data:`~._limits.HEALTH_RESERVED_CONNECTIONS` kept for probes: a connection in a reserved slot gets one
answer, ``GET /healthz`` answered as usual and anything else a retryable 503 (``Retry-After``, counted
``refused_connection``), then is closed, so a full listener still answers its liveness probe. When every
slot is taken, a new connection takes the slot of the oldest one that has sent nothing since it connected
at least :data:`~._limits.SLOW_AFTER_S` ago, which is closed as at its idle deadline; else it waits in the
lobby (:mod:`._lobby`) for its request head, then takes the slot of a request coming below
``min_request_rate`` (cut, counted ``incomplete``), else of an idle connection, else of a keep-alive sender
between requests: idle and slow senders never starve probes or senders. With TLS (no lobby: the head is
encrypted) it takes the oldest idle connection's slot (first those that never completed a request, then
keep-alive ones), else it is closed at accept (counted ``refused_connection``; OTLP clients retry); the
handshake runs in the connection's thread, within ``header_timeout_s``, so a silent client cannot block
accept.
"""

from __future__ import annotations

import errno
import io
import logging
import ssl
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any, Final

from google.rpc import code_pb2  # type: ignore[import-untyped,unused-ignore]

from ._http_listener import HttpListener
from ._json import JSON_MEDIA_TYPE, to_json
from ._limits import IDLE_BETWEEN_REQUESTS, IDLE_BUSY, IDLE_NEVER_USED, IDLE_SLOW, DeadlineReader
from ._lobby import Lobby
from ._parsing import HeaderSectionReader, Refusal, body_length, gunzip, has_body, quoted_path, route_path
from ._status import invalid, os_error, parser_error, ssl_context, unavailable
from ._status import status as status_message

if TYPE_CHECKING:
    from ._export import ExportResult
    from ._types import Receiver

__all__ = ["HEALTH_PATH", "TRACES_PATH", "start_http_server"]

_log = logging.getLogger("ctxutil_otel.serve")

TRACES_PATH: Final = "/v1/traces"
HEALTH_PATH: Final = "/healthz"
_PROTOBUF: Final = "application/x-protobuf"
_CHUNK: Final = 64 * 1024


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ctxutil-otel-serve"
    sys_version = ""
    server: HttpListener
    _reader: DeadlineReader  # rfile's raw stream (setup)
    _health_only: bool  # holds a reserved slot: GET /healthz only, one request
    _in_headers: bool  # reading the request line and headers (else the body, or answering)
    _json = False  # the request is OTLP/JSON: answer in JSON
    raw_requestline: bytes  # set by handle_one_request

    def version_string(self) -> str:
        return self.server_version

    def setup(self) -> None:
        receiver = self.server.receiver
        self.request.settimeout(receiver.header_timeout_s)  # the TLS handshake's bound
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()
        self._health_only = self.server.slots.health_only(self.request)
        self._reader = DeadlineReader(
            self.connection,
            write_timeout_s=receiver.request_timeout_s,
            prefix=self.server.take_head(self.request),
        )
        self.rfile.close()  # the socket's own file object: replaced by one that keeps the deadlines
        self.rfile = io.BufferedReader(self._reader)
        self._in_headers = False
        self._served = 0  # requests answered on this connection
        self._min_rate = receiver.min_request_rate
        self.server.slots.attach(self.request, self._idle, self._reader.cut)

    def _idle(self) -> int:
        """Waiting for a request, nothing of it received: the connection may be closed for a newcomer
        (first those that never completed a request); reading one below the minimum rate: it may be cut
        for a newcomer whose request head is in."""
        if self._reader.pace.too_slow(self._min_rate, time.monotonic()):
            return IDLE_SLOW
        if not (self._in_headers and self._reader.received == 0 and not self._reader.receiving):
            return IDLE_BUSY
        return IDLE_BETWEEN_REQUESTS if self._served else IDLE_NEVER_USED

    def handle_one_request(self) -> None:
        receiver = self.server.receiver
        self._reader.start(receiver.header_timeout_s)
        self._reader.pace.begin()
        self._in_headers = True
        super().handle_one_request()  # on TimeoutError: closes the connection without an answer
        self._served += 1
        if self._in_headers and self._reader.expired and self._reader.received:
            _log.debug("ctxutil serve: request line/headers not received in time")
            receiver.count("incomplete")  # a sender that sent nothing (idle keep-alive) is not counted

    def parse_request(self) -> bool:
        """The standard library's parse, plus: one empty line before the request line is ignored
        (RFC 9112 section 2.2) and a blank request line answered 400 (the parser closes the connection
        without an answer); the header section is read through a :class:`._parsing.HeaderSectionReader`,
        so that one over :data:`._parsing.MAX_HEADER_BYTES` is answered 431 as soon as it passes it."""
        if self.raw_requestline in (b"\r\n", b"\n"):
            self.raw_requestline = self.rfile.readline(65537)
            if not self.raw_requestline:  # closed after the empty line: no request, as at any other EOF
                self.close_connection = True
                return False
            if len(self.raw_requestline) > 65536:  # http.server's limit on the request line
                self.command = self.requestline = self.request_version = ""
                self.send_error(HTTPStatus.REQUEST_URI_TOO_LONG)
                return False
        if not self.raw_requestline.split():
            self.command = self.requestline = self.request_version = ""
            self.send_error(HTTPStatus.BAD_REQUEST)
            return False
        rfile = self.rfile
        self.rfile = HeaderSectionReader(rfile)
        try:
            parsed = super().parse_request()
        finally:
            self.rfile = rfile
        if not parsed:
            return False
        self._in_headers = False
        if self.headers.defects:  # e.g. space before a colon: the parser dropped that line and the rest
            message = "malformed header field line (RFC 9112 section 5)"
            self._fail(HTTPStatus.BAD_REQUEST, code_pb2.INVALID_ARGUMENT, message, "bad_request")
            return False
        self._reader.start(self.server.receiver.request_timeout_s)  # the body's own deadline
        if not self._health_only:
            return True
        self.close_connection = True  # a reserved slot serves one request
        if self.command == "GET" and route_path(self.path) == HEALTH_PATH:
            return True
        message = "too many connections: this slot is reserved for health probes; retry later"
        self.server.receiver.count("refused_connection")
        self._retry_later(message)
        return False

    # --- routes -----------------------------------------------------------------------------------
    def do_GET(self) -> None:
        if has_body(self.headers):  # not read: it must not be taken for the next request (smuggling)
            self.close_connection = True
        if route_path(self.path) == TRACES_PATH:
            self._wrong_method("POST")
            return
        if route_path(self.path) != HEALTH_PATH:
            self._fail(
                HTTPStatus.NOT_FOUND, code_pb2.NOT_FOUND, f"no route {quoted_path(self.path)}", "not_found"
            )
            return
        ok, reason = self.server.receiver.health()
        body = f"{reason}\n".encode()
        self.send_response(HTTPStatus.OK if ok else HTTPStatus.SERVICE_UNAVAILABLE)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        receiver = self.server.receiver
        if route_path(self.path) == HEALTH_PATH:
            self._wrong_method("GET")
            return
        if route_path(self.path) != TRACES_PATH:
            message = (
                f"no route {quoted_path(self.path)}: this receiver accepts traces only, at {TRACES_PATH}"
            )
            self._fail(HTTPStatus.NOT_FOUND, code_pb2.NOT_FOUND, message, "not_found")
            return
        if not receiver.authorized(self.headers.get("Authorization")):
            self._fail(
                HTTPStatus.UNAUTHORIZED,
                code_pb2.UNAUTHENTICATED,
                "missing or invalid bearer token",
                "unauthenticated",
                extra=(("WWW-Authenticate", "Bearer"),),
            )
            return
        media = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
        encoding = (self.headers.get("Content-Encoding") or "identity").strip().lower()
        self._json = media == JSON_MEDIA_TYPE  # answers in the request's encoding, errors included
        if media not in (_PROTOBUF, JSON_MEDIA_TYPE) or encoding not in ("identity", "gzip"):
            message = (
                f"unsupported content type {media or '(none)'!r} / encoding {encoding!r}: send {_PROTOBUF} "
                f"or {JSON_MEDIA_TYPE} (OTLP/JSON), optionally gzip-encoded"
            )
            self._fail(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                code_pb2.INVALID_ARGUMENT,
                message,
                "unsupported_media_type",
            )
            return
        try:
            length = body_length(self.headers, receiver.max_request_bytes)
        except Refusal as refusal:
            self._fail(*refusal.args)
            return
        body = self._read_body(length)
        if body is None:
            return
        if encoding == "gzip":
            body = self._gunzip(body)
            if body is None:
                return
        self._answer(receiver.export(body, encoding="json" if self._json else "protobuf"))

    # --- helpers ----------------------------------------------------------------------------------
    def _read_body(self, length: int) -> bytes | None:
        """Read exactly ``length`` bytes within ``request_timeout_s`` (the deadline started once the headers
        were read); ``None`` (connection closed, counted ``incomplete``) when the sender disconnects or
        stalls."""
        parts: list[bytes] = []
        left = length
        try:
            while left > 0:
                chunk = self.rfile.read(min(_CHUNK, left))
                if not chunk:
                    raise EOFError("sender closed the connection mid-body")
                parts.append(chunk)
                left -= len(chunk)
        except (OSError, EOFError) as exc:  # TimeoutError is an OSError
            _log.debug("ctxutil serve: incomplete request body (%s)", type(exc).__name__)
            self.server.receiver.count("incomplete")
            self.close_connection = True
            return None
        self._reader.pace.end()  # read: its export is not a slow request
        return b"".join(parts)

    def send_response(self, code: int, message: str | None = None) -> None:
        self._reader.pace.end()  # answering: nothing more of this request is read
        super().send_response(code, message)

    def _gunzip(self, body: bytes) -> bytes | None:
        """:func:`._parsing.gunzip` within ``max_request_bytes``; ``None`` (answered 413 / 400) when too
        large or not valid gzip."""
        limit = self.server.receiver.max_request_bytes
        try:
            out = gunzip(body, limit)
        except ValueError as exc:
            self.server.receiver.count("bad_request")
            self.close_connection = True
            self._bad_body(str(exc))
            return None
        if len(out) > limit:
            message = f"decompressed request body exceeds the limit of {limit} bytes"
            self._fail(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, code_pb2.RESOURCE_EXHAUSTED, message, "too_large")
            return None
        return out

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's parser found the request unusable (malformed or over-long request line,
        too many or too long headers, unsupported method or HTTP version): counted and answered like the
        listener's own errors (:func:`._status.parser_error`), connection closed. Its ``message`` and
        ``explain`` quote the request line, so they are neither sent nor logged."""
        rpc_code, text, outcome = parser_error(code)
        _log.debug("ctxutil serve: HTTP %d from the request parser (outcome %s)", code, outcome)
        self._in_headers = False  # answered: not "incomplete"
        if self.request_version == "HTTP/0.9":  # the default (not parsed): answer with a status line too
            self.request_version = self.protocol_version
        self._fail(HTTPStatus(code), rpc_code, text, outcome)

    def _answer(self, result: ExportResult) -> None:
        if result.outcome in ("ok", "partial"):
            self._send(HTTPStatus.OK, result.response)
        elif result.outcome == "bad_request":
            self._bad_body(result.message)
        elif result.outcome in ("overloaded", "unavailable"):
            self._retry_later(result.message)
        else:
            self._send(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                self._encode(status_message(code_pb2.INTERNAL, result.message)),
            )

    def _bad_body(self, message: str) -> None:
        """400 with a ``BadRequest`` detail on field ``body`` (not retryable)."""
        self._send(HTTPStatus.BAD_REQUEST, self._encode(invalid(message, "body")), self._closing())

    def _retry_later(self, message: str) -> None:
        """The retryable 503: ``Retry-After`` and a ``RetryInfo`` detail."""
        seconds = self.server.receiver.retry_after_s
        headers = (("Retry-After", str(seconds)), *self._closing())
        self._send(HTTPStatus.SERVICE_UNAVAILABLE, self._encode(unavailable(message, seconds)), headers)

    def _closing(self) -> tuple[tuple[str, str], ...]:
        return (("Connection", "close"),) if self.close_connection else ()

    def _encode(self, message: Any) -> bytes:
        """A ``google.rpc.Status`` in the request's encoding."""
        return to_json(message) if self._json else bytes(message.SerializeToString())

    def _fail(
        self,
        http_status: HTTPStatus,
        code: int,
        message: str,
        outcome: str,
        *details: Any,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """Answer an error before (or instead of) reading the body; the connection is closed after, as
        an unread body would otherwise be taken for the next request."""
        self.server.receiver.count(outcome)
        self.close_connection = True
        body = self._encode(status_message(code, message, *details))
        self._send(http_status, body, (*extra, ("Connection", "close")))

    def _wrong_method(self, allowed: str) -> None:
        """405 with ``Allow`` (RFC 9110 section 15.5.6) for a known path asked with the other method."""
        message = f"{self.command} is not allowed on {quoted_path(self.path)}: use {allowed}"
        self._fail(
            HTTPStatus.METHOD_NOT_ALLOWED,
            code_pb2.UNIMPLEMENTED,
            message,
            "method_not_allowed",
            extra=(("Allow", allowed),),
        )

    def _send(self, status: HTTPStatus, body: bytes, headers: tuple[tuple[str, str], ...] = ()) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", JSON_MEDIA_TYPE if self._json else _PROTOBUF)
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":  # HEAD (answered by send_error): the same head, no body
                self.wfile.write(body)
        except OSError:
            self.close_connection = True  # the sender went away before reading the answer

    def log_message(self, format: str, *args: Any) -> None:
        # Request lines only (never headers: they carry the token); at debug level.
        _log.debug("ctxutil serve http %s: " + format, self.address_string(), *args)


def _is_health_probe(head: bytes) -> bool:
    """Whether a request head (as read in the lobby) asks ``GET /healthz``."""
    line = head.lstrip(b"\r\n").split(b"\n", 1)[0].split()
    return len(line) >= 2 and line[0] == b"GET" and route_path(line[1].decode("latin-1")) == HEALTH_PATH


def start_http_server(receiver: Receiver, port: int) -> tuple[HttpListener, int]:
    """Bind ``receiver.host:port``, serve in a daemon thread; returns the server and the bound port.

    Raises:
        OSError: naming the address, when it cannot be bound; or naming the file, when a TLS file cannot
            be read.
        ValueError: when the TLS files are not a usable certificate/key pair.
    """
    context = ssl_context(receiver.tls) if receiver.tls is not None else None
    address = receiver.address(port)
    try:
        server = HttpListener(
            (receiver.host.strip("[]"), port),
            _Handler,
            ipv6=":" in receiver.host,
            max_connections=receiver.max_connections,
        )
    except OSError as exc:
        reason = "the port is already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise os_error(exc, f"cannot bind the OTLP/HTTP listener to {address}: {reason}") from None
    server.receiver = receiver
    server.ssl_context = context
    if context is None:

        def admit(sock: Any, address: Any, head: bytes, waited_s: float) -> bool:
            probe = _is_health_probe(head)
            return server.admit_from_lobby(sock, address, head, probe=probe, waited_s=waited_s)

        server.lobby = Lobby(receiver.max_connections, receiver.header_timeout_s, admit, receiver.count)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.2}, name="ctxutil-serve-http", daemon=True
    )
    server.thread = thread
    thread.start()
    return server, int(server.server_address[1])
