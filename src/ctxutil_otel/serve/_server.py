"""``TraceReceiver``: the OTLP trace receiver behind ``ctxutil-otel serve``: its settings, the gRPC and
HTTP/protobuf listeners (:mod:`._grpc`, :mod:`._http`) feeding one
:class:`~ctxutil_otel.capture.spans.UtilizationSpanProcessor`, its request counters, and its graceful
shutdown.

Each export is handled as :mod:`._export` describes (bearer token, size, decoding, back-pressure, feeding
the processor, and the OpenTelemetry protocol specification sections followed). The receiver adds the
shutdown gate (an export arriving once :meth:`TraceReceiver.stop` has begun gets the retryable 503 /
``UNAVAILABLE``), the count of exports in progress that ``stop`` waits for, and the :class:`ReceiverStats`
counters (refusals logged at most once per outcome every :data:`LOG_INTERVAL_S` seconds).

Traces only: the metrics and logs services are not offered (gRPC answers ``UNIMPLEMENTED``, HTTP 404 for
``/v1/metrics`` and ``/v1/logs``). Send only traces to this receiver (a Collector pipeline with only the
traces signal).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from .._throttled_log import ThrottledLog
from . import _grpc, _http, _status
from ._export import Encoding, ExportResult, bearer_authorized, export_request
from ._http_listener import HttpListener
from ._types import TLSFiles

if TYPE_CHECKING:
    from ..capture.spans import UtilizationSpanProcessor
    from ..emit._setup import TelemetryHandle

__all__ = [
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "DEFAULT_MIN_REQUEST_RATE",
    "DEFAULT_REQUEST_TIMEOUT_S",
    "LOG_INTERVAL_S",
    "ReceiverStats",
    "TLSFiles",
    "TraceReceiver",
]

_log = logging.getLogger("ctxutil_otel.serve")

#: Default bound of one request body, bytes: 16 MiB. An OpenTelemetry SDK's default batch (512 spans) of
#: RAG spans carrying document text measured 5.2 MiB (OpenInference, 4 chunks a turn), over gRPC's own 4 MiB
#: default; the Collector's OTLP/HTTP receiver allows 20 MiB. Larger batches: bound them at the sender
#: (``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``) or raise ``--max-request-bytes``.
DEFAULT_MAX_REQUEST_BYTES: Final = 16 * 1024 * 1024
#: Default seconds for an HTTP request's line and headers (and an idle keep-alive connection).
DEFAULT_HEADER_TIMEOUT_S: Final = 10.0
#: Default seconds for an HTTP request's body.
DEFAULT_REQUEST_TIMEOUT_S: Final = 30.0
#: Default bound on HTTP connections served at once and on concurrent gRPC calls.
DEFAULT_MAX_CONNECTIONS: Final = 64
#: Default minimum rate of an HTTP request, bytes/s (Apache's ``mod_reqtimeout`` default ``MinRate``).
DEFAULT_MIN_REQUEST_RATE: Final = 500.0

#: Seconds between two log messages about refused requests of one outcome.
LOG_INTERVAL_S: Final = 10.0
_QUIET_OUTCOMES: Final = frozenset({"ok", "partial"})


@dataclass(frozen=True, kw_only=True)
class ReceiverStats:
    """Counters since start: ``requests`` by outcome (the :class:`ExportResult` outcomes plus the
    transports' ``unauthenticated``, ``too_large`` (body over ``max_request_bytes``, or an HTTP request
    line / headers over the HTTP parser's limits), ``unsupported_media_type``, ``length_required``,
    ``not_found``, ``method_not_allowed`` (``GET /v1/traces``, ``POST /healthz``), ``not_implemented``
    (an HTTP method or HTTP version the listener does not serve),
    ``bad_request`` (also a malformed HTTP request line), ``incomplete`` (sender disconnected or ran out
    of time mid-request, or was cut as slower than ``min_request_rate``), ``refused_connection`` (closed
    at accept or in the lobby, or answered 503 in a slot reserved for health probes: ``max_connections``
    reached)), ``spans_accepted`` and ``spans_rejected``."""

    requests: dict[str, int] = field(default_factory=dict)
    spans_accepted: int = 0
    spans_rejected: int = 0


class TraceReceiver:
    """OTLP/gRPC and OTLP/HTTP trace listeners feeding a span processor (request handling:
    :mod:`._export`; the rest: module docstring).

    Args:
        processor: The span processor; its evaluator's ``stats().queue_size`` and ``settings.max_queue_size``
            drive back-pressure.
        host: Address to bind (default ``127.0.0.1``: loopback only; ``0.0.0.0`` / ``::`` for all).
        grpc_port / http_port: Ports; ``0`` picks a free one; ``None`` disables that listener.
        max_request_bytes: Largest accepted request body in bytes (> 0).
        tls: Serve both listeners over TLS with these PEM files (``None``: plaintext).
        token: Require ``Authorization: Bearer <token>`` (printable ASCII, no spaces; ``None``: no check).
        retry_after_s: Seconds a refused sender is told to wait (HTTP ``Retry-After``, gRPC ``RetryInfo``).
        header_timeout_s: Seconds (> 0) an HTTP request has to deliver its request line and headers, in
            total; also how long an idle keep-alive connection is kept, and the bound on a TLS handshake.
            Past it the connection is closed.
        request_timeout_s: Seconds (> 0) an HTTP request has to deliver its body, in total, once its
            headers are in; past it the connection is closed (counted ``incomplete``).
        min_request_rate: Bytes/s (>= 0; 0: off). When every HTTP slot is taken, a newcomer whose request
            head is in takes the slot of a connection whose request (head and body) has come slower than
            this on average since its first byte, at least 1 s ago; that one is cut (counted
            ``incomplete``). Newcomers wait for their head without a slot (at most ``max_connections``
            of them, each ``header_timeout_s`` at most).
        max_connections: HTTP connections (>= 1) served at once, plus
            :data:`~ctxutil_otel.serve.HEALTH_RESERVED_CONNECTIONS` kept for ``GET /healthz`` (further
            connections are closed at accept: OTLP clients retry); and concurrent gRPC calls (more get
            ``RESOURCE_EXHAUSTED`` from gRPC itself).
        telemetry: Providers to shut down after the processor in :meth:`stop` (the CLI's).

    Raises:
        ValueError: for an invalid bound, token or port, naming it.
    """

    def __init__(
        self,
        processor: UtilizationSpanProcessor,
        *,
        host: str = "127.0.0.1",
        grpc_port: int | None = 4317,
        http_port: int | None = 4318,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        tls: TLSFiles | None = None,
        token: str | None = None,
        retry_after_s: int = 1,
        header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
        request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        telemetry: TelemetryHandle | None = None,
        min_request_rate: float = DEFAULT_MIN_REQUEST_RATE,
    ) -> None:
        for name, port in (("grpc_port", grpc_port), ("http_port", http_port)):
            if port is not None and not 0 <= port <= 65535:
                raise ValueError(f"{name} must be 0..65535 or None, got {port!r}")
        if grpc_port is None and http_port is None:
            raise ValueError("at least one of grpc_port and http_port must be enabled")
        if max_request_bytes <= 0:
            raise ValueError(f"max_request_bytes must be > 0, got {max_request_bytes!r}")
        if retry_after_s < 0:
            raise ValueError(f"retry_after_s must be >= 0, got {retry_after_s!r}")
        for name, seconds in (
            ("header_timeout_s", header_timeout_s),
            ("request_timeout_s", request_timeout_s),
        ):
            if not (math.isfinite(seconds) and seconds > 0):
                raise ValueError(f"{name} must be a finite number of seconds > 0, got {seconds!r}")
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections!r}")
        if not (math.isfinite(min_request_rate) and min_request_rate >= 0):
            raise ValueError(
                f"min_request_rate must be a finite number of bytes/s >= 0, got {min_request_rate!r}"
            )
        if token is not None and (
            not token or not token.isascii() or not token.isprintable() or " " in token
        ):
            raise ValueError("the bearer token must be non-empty printable ASCII without spaces")
        self.processor = processor
        self.host = host
        self.max_request_bytes = max_request_bytes
        self.tls = tls
        self.retry_after_s = retry_after_s
        self.header_timeout_s = header_timeout_s
        self.request_timeout_s = request_timeout_s
        self.min_request_rate = float(min_request_rate)
        self.max_connections = max_connections
        self.telemetry = telemetry
        self._token = None if token is None else token.encode("ascii")
        self._ports: dict[str, int | None] = {"grpc": grpc_port, "http": http_port}
        self._max_queue = int(processor.evaluator.settings.max_queue_size)
        self._cond = threading.Condition()
        self._accepting = False
        self._in_flight = 0
        self._requests: dict[str, int] = {}
        self._refusal_log = ThrottledLog(LOG_INTERVAL_S)
        self._spans = [0, 0]  # accepted, rejected
        self._grpc: _grpc.GrpcListener | None = None
        self._http: HttpListener | None = None
        self._stopping = False
        self._stop_result: bool | None = None
        self._logged_internal = False

    # --- shared request handling (called by both transports) -------------------------------------
    def authorized(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` value (``"Bearer <token>"``, scheme case-insensitive) carries the
        configured token; always ``True`` when no token is configured. Constant-time comparison."""
        return bearer_authorized(self._token, authorization)

    def count(self, outcome: str) -> None:
        """Count one request by outcome (see :class:`ReceiverStats`); refusals are also logged, at most
        one warning per outcome every :data:`LOG_INTERVAL_S` seconds (with the count since the last)."""
        with self._cond:
            due = self._tally(outcome)
        if due:
            self._log_refusals(outcome, due)

    def _tally(self, outcome: str) -> int:
        """Count (lock held); returns the refusals to log now (0 when not due or not a refusal)."""
        self._requests[outcome] = self._requests.get(outcome, 0) + 1
        if outcome in _QUIET_OUTCOMES:
            return 0
        suppressed = self._refusal_log.due(outcome)
        return 0 if suppressed is None else suppressed + 1  # this one and those not logged since

    @staticmethod
    def _log_refusals(outcome: str, count: int) -> None:
        level = logging.INFO if outcome == "unavailable" else logging.WARNING
        _log.log(level, "ctxutil serve: %d request(s) refused, outcome %s (ReceiverStats)", count, outcome)

    @property
    def accepting(self) -> bool:
        return self._accepting

    def export(self, payload: bytes, *, encoding: Encoding = "protobuf") -> ExportResult:
        """Decode one ``ExportTraceServiceRequest`` body (``encoding``: binary protobuf, or OTLP/JSON),
        apply back-pressure, feed the processor
        (:func:`._export.export_request`), counted in :meth:`stats`; outcome ``unavailable`` while not
        :attr:`accepting` (before :meth:`start`, once :meth:`stop` has begun). Never raises (a bug becomes
        outcome ``internal``)."""
        with self._cond:
            accepting = self._accepting
            if accepting:
                self._in_flight += 1
            else:
                due = self._tally("unavailable")
        if not accepting:
            if due:
                self._log_refusals("unavailable", due)
            return ExportResult("unavailable", message="the receiver is shutting down")
        try:
            result = self._export(payload, encoding)
        except Exception:
            if not self._logged_internal:
                self._logged_internal = True
                _log.exception("ctxutil serve: unexpected error handling an export (answered as internal)")
            result = ExportResult("internal", message="internal error while handling the export")
        with self._cond:
            self._in_flight -= 1
            due = self._tally(result.outcome)
            self._spans[0] += result.accepted
            self._spans[1] += result.rejected
            self._cond.notify_all()
        if due:
            self._log_refusals(result.outcome, due)
        return result

    def _export(self, payload: bytes, encoding: Encoding) -> ExportResult:
        return export_request(
            payload,
            self.processor,
            overloaded=self.overloaded,
            max_queue_size=self._max_queue,
            encoding=encoding,
        )

    def health(self) -> tuple[bool, str]:
        """``(True, "ok")`` while accepting with every listener able to take a request; else ``False``
        and the reason (shutting down, the OTLP/gRPC listener saturated by calls in progress, a listener
        thread gone)."""
        if not self._accepting:
            return False, "shutting down"
        grpc_listener, http_server = self._grpc, self._http
        if grpc_listener is not None:
            problem = grpc_listener.problem()
            if problem is not None:
                return False, problem
        if http_server is not None and not http_server.running():
            return False, "OTLP/HTTP listener stopped"
        return True, "ok"

    def overloaded(self) -> bool:
        """The evaluator's queue is full (public ``Evaluator.stats()``; one lock, once per request)."""
        return self.processor.evaluator.stats().queue_size >= self._max_queue

    # --- lifecycle ------------------------------------------------------------------------------
    @property
    def grpc_port(self) -> int | None:
        """The bound gRPC port after :meth:`start` (``None`` when disabled)."""
        return self._ports["grpc"]

    @property
    def http_port(self) -> int | None:
        """The bound HTTP port after :meth:`start` (``None`` when disabled)."""
        return self._ports["http"]

    def address(self, port: int) -> str:
        """``host:port`` with IPv6 hosts in brackets."""
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{port}"

    def start(self) -> TraceReceiver:
        """Bind and start the enabled listeners.

        Raises:
            OSError: when a port cannot be bound or a TLS file cannot be read (nothing is left running).
            ValueError: when the TLS files do not hold a usable certificate and key.
        """
        if self.tls is not None:
            _status.ssl_context(self.tls)  # a bad certificate/key fails here, for both listeners
        try:
            if self._ports["grpc"] is not None:
                self._grpc, self._ports["grpc"] = _grpc.start_grpc_server(self, self._ports["grpc"])
            if self._ports["http"] is not None:
                self._http, self._ports["http"] = _http.start_http_server(self, self._ports["http"])
        except BaseException:
            self._close_listeners(0.0)
            raise
        with self._cond:
            self._accepting = True
        return self

    def stop(self, timeout_s: float | None = None, *, telemetry_timeout_s: float = 10.0) -> bool:
        """Graceful shutdown: stop accepting (new exports get the retryable 503 / ``UNAVAILABLE``), let
        exports in progress finish, flush the processor (evaluate what was submitted), shut it down
        (turns still buffered are counted dropped ``shutdown``), then shut down ``telemetry``.

        ``timeout_s`` (seconds; default: the ``shutdown_timeout_s`` setting) bounds everything but the
        telemetry shutdown, which gets ``telemetry_timeout_s`` of its own (exports over the network).
        Returns ``True`` when everything submitted was evaluated and exported in time. Idempotent: a
        later call returns the first call's result; a concurrent call (a second signal while the first
        stop flushes) waits for it, at most ``timeout_s``, and returns ``False`` if it is still running.
        """
        if timeout_s is None:
            timeout_s = float(self.processor.evaluator.settings.shutdown_timeout_s)
        with self._cond:
            if self._stopping:
                done = self._cond.wait_for(lambda: self._stop_result is not None, timeout_s)
                return bool(done and self._stop_result)
            self._stopping = True
            self._cond.notify_all()
        try:
            result = self._stop(timeout_s, telemetry_timeout_s)
        except BaseException:
            result = False
            raise
        finally:
            with self._cond:
                self._stop_result = result
                self._cond.notify_all()
        return result

    def _stop(self, timeout_s: float, telemetry_timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._accepting = False
        self._close_listeners(min(2.0, timeout_s))
        with self._cond:
            drained = self._cond.wait_for(lambda: self._in_flight == 0, max(0.0, deadline - time.monotonic()))
        remaining_ms = int(max(0.0, deadline - time.monotonic()) * 1000)
        flushed = self.processor.force_flush(remaining_ms)
        self.processor.shutdown(int(max(0.0, deadline - time.monotonic()) * 1000))
        exported = True
        if self.telemetry is not None:
            exported = self.telemetry.shutdown(int(telemetry_timeout_s * 1000))
        return bool(drained and flushed and exported)

    def _close_listeners(self, grace_s: float) -> None:
        grpc_listener, http_server = self._grpc, self._http
        self._grpc = self._http = None
        stopped = None
        if grpc_listener is not None:
            stopped = grpc_listener.stop(grace_s)  # refuses new calls at once; in-flight ones get grace_s
        if http_server is not None:
            http_server.close(grace_s)
        if stopped is not None:
            stopped.wait(grace_s + 1.0)

    def stats(self) -> ReceiverStats:
        """A snapshot of the request and span counters."""
        with self._cond:
            return ReceiverStats(
                requests=dict(self._requests), spans_accepted=self._spans[0], spans_rejected=self._spans[1]
            )

    def __enter__(self) -> TraceReceiver:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
