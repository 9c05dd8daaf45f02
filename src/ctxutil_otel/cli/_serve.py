"""``ctxutil-otel serve``: an OTLP trace receiver (gRPC 4317, HTTP/protobuf and HTTP/JSON 4318) that
evaluates the RAG turns in the traces it receives and exports the results over OTLP.

Configuration:

* Flags: ``--host`` (default ``127.0.0.1``: loopback only), ``--grpc-port`` / ``--http-port`` (``0``
  disables that listener), ``--max-request-bytes`` (default 16 MiB, both transports), ``--max-connections``
  (default 64: HTTP connections served at once, plus 2 kept for ``GET /healthz``; also the bound on
  concurrent gRPC calls), ``--header-timeout`` (seconds, default 10: an HTTP request's line and headers,
  and an idle keep-alive connection), ``--request-timeout`` (seconds, default 30: an HTTP request's body),
  ``--min-request-rate`` (bytes/s, default 500, 0 off: when every HTTP slot is taken, a slower request
  yields its slot to a newcomer whose request head is in),
  ``--tls-cert`` / ``--tls-key`` (PEM files; or ``CTXUTIL_SERVE_TLS_CERT`` / ``CTXUTIL_SERVE_TLS_KEY``),
  ``--token-file`` (a file holding the bearer token senders must present; or the token itself in
  ``CTXUTIL_SERVE_TOKEN``). Only the files and the token have environment variables (they usually come
  from mounted secrets; they are settings, resolved with the others: docs/settings.md); the numbers are
  flags only.
* Evaluator: the ``CTXUTIL_*`` settings (sample rate, judge, queue size, rate cap, ...;
  :class:`~ctxutil_otel.Settings`).
* Results: :func:`~ctxutil_otel.emit.configure_telemetry`, i.e. the standard ``OTEL_EXPORTER_OTLP_*``
  variables (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``..._PROTOCOL``, ``..._HEADERS``, ...); without any, results
  are printed to the console (one compact line each).

Exit status: on SIGTERM or SIGINT, stop accepting, finish the exports in progress, evaluate what was
submitted (within ``CTXUTIL_SHUTDOWN_TIMEOUT_S``), export the results, then exit 0; exit 1 when that
deadline passed first (evaluations still queued are dropped, counted reason ``shutdown``) or the final
export of the results did not finish in time (exports the backend refused are counted on the ``stopped;``
line, not in the status). A second signal exits at once with ``128 + signal``. Exit 2 for bad options or an
address that cannot be bound (the message names the listener and its address).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._settings import Settings
    from ..emit._setup import TelemetryHandle
    from ..serve import TLSFiles, TraceReceiver
    from ..worker._evaluator import Evaluator
    from ._export_tally import ExportTally

__all__ = ["TLS_CERT_ENV", "TLS_KEY_ENV", "TOKEN_ENV", "register"]

TOKEN_ENV = "CTXUTIL_SERVE_TOKEN"
TLS_CERT_ENV = "CTXUTIL_SERVE_TLS_CERT"
TLS_KEY_ENV = "CTXUTIL_SERVE_TLS_KEY"


def _bounded_int(low: int, high: int | None, rule: str) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``low..high`` (``high`` ``None``: no upper bound); ``rule``
    is the error message for one outside."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{rule}, got {value}")
        return value

    return parse


_port = _bounded_int(0, 65535, "port must be 0..65535 (0 disables the listener)")
_positive = _bounded_int(1, None, "must be > 0")


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of bytes/s: {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of bytes/s >= 0, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds > 0, got {text!r}")
    return value


_EPILOG = (
    "exit status: on SIGTERM/SIGINT serve stops accepting, evaluates what it has received and exports the "
    "results within CTXUTIL_SHUTDOWN_TIMEOUT_S (default 5 s), then exits 0; it exits 1 when that deadline "
    "passed first (queued evaluations are dropped, counted reason 'shutdown') or the final export of the "
    "results did not finish in time (refused exports are counted on the 'stopped;' line); a second "
    "signal exits at once (128 + signal); 2 for bad options or an address that cannot be bound."
)


def register(subparsers: Any) -> None:
    from ..serve import HEALTH_RESERVED_CONNECTIONS
    from ..serve._server import (
        DEFAULT_HEADER_TIMEOUT_S,
        DEFAULT_MAX_CONNECTIONS,
        DEFAULT_MAX_REQUEST_BYTES,
        DEFAULT_MIN_REQUEST_RATE,
        DEFAULT_REQUEST_TIMEOUT_S,
    )

    parser = subparsers.add_parser(
        "serve",
        help="OTLP trace receiver that evaluates the RAG traces it receives (an evaluator replica)",
        description="Receive traces over OTLP (gRPC, HTTP/protobuf and HTTP/JSON), evaluate the sampled RAG "
        "turns (OpenInference, OpenTelemetry GenAI, OpenLLMetry spans) and export evaluation spans, events "
        "and metrics over OTLP (OTEL_EXPORTER_OTLP_* variables; the console when none is set). Evaluator "
        "settings come from CTXUTIL_* variables; at most CTXUTIL_MAX_EVALUATIONS_PER_SECOND (default 10) "
        "evaluations per second, the rest counted dropped 'rate_limited' (0 = no cap). "
        "Health: GET /healthz on the HTTP port.",
        epilog=_EPILOG,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument(
        "--grpc-port", type=_port, default=4317, help="OTLP/gRPC port (default 4317; 0 = off)"
    )
    parser.add_argument(
        "--http-port", type=_port, default=4318, help="OTLP/HTTP port (default 4318; 0 = off)"
    )
    parser.add_argument(
        "--max-request-bytes",
        type=_positive,
        default=DEFAULT_MAX_REQUEST_BYTES,
        help=f"largest request body accepted, bytes (default {DEFAULT_MAX_REQUEST_BYTES})",
    )
    parser.add_argument(
        "--max-connections",
        type=_positive,
        default=DEFAULT_MAX_CONNECTIONS,
        metavar="N",
        help=f"HTTP connections served at once, plus {HEALTH_RESERVED_CONNECTIONS} kept for GET /healthz "
        "so that probes are answered when the others are taken (further connections are closed at once; "
        f"OTLP clients retry); also the bound on concurrent gRPC calls (default {DEFAULT_MAX_CONNECTIONS})",
    )
    parser.add_argument(
        "--header-timeout",
        type=_seconds,
        default=DEFAULT_HEADER_TIMEOUT_S,
        metavar="SECONDS",
        help="seconds an HTTP request has to send its request line and headers, in total; also how long an "
        f"idle keep-alive connection is kept (default {DEFAULT_HEADER_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--request-timeout",
        type=_seconds,
        default=DEFAULT_REQUEST_TIMEOUT_S,
        metavar="SECONDS",
        help="seconds an HTTP request has to send its body, in total, once its headers are in "
        f"(default {DEFAULT_REQUEST_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--min-request-rate",
        type=_rate,
        default=DEFAULT_MIN_REQUEST_RATE,
        metavar="BYTES_PER_S",
        help="when every HTTP slot is taken, a newcomer whose request head is in takes the slot of a "
        "request that has come slower than this since its first byte (at least 1 s ago); 0 turns it off "
        f"(default {DEFAULT_MIN_REQUEST_RATE:g})",
    )
    parser.add_argument("--tls-cert", type=Path, default=None, help=f"PEM certificate (or {TLS_CERT_ENV})")
    parser.add_argument("--tls-key", type=Path, default=None, help=f"PEM private key (or {TLS_KEY_ENV})")
    parser.add_argument(
        "--token-file",
        type=Path,
        default=None,
        help=f"file holding the bearer token senders must present (or the token in {TOKEN_ENV})",
    )
    parser.set_defaults(func=run)


def _token(args: argparse.Namespace, settings: Settings) -> str | None:
    """The token from ``--token-file`` or the ``serve_token`` setting (``CTXUTIL_SERVE_TOKEN``). Raises
    ``ValueError`` (never showing the token) for an unreadable or empty file."""
    path: Path | None = args.token_file
    if path is not None:
        try:
            token = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(
                f"--token-file {args.token_file}: cannot read it ({type(exc).__name__})"
            ) from None
        if not token:
            raise ValueError(f"--token-file {args.token_file}: the file is empty")
        return token
    secret = settings.serve_token
    token = "" if secret is None else secret.get_secret_value().strip()
    return token or None


def _settings() -> Settings:
    """The evaluator settings of ``serve``: ``CTXUTIL_*`` > ``serve``'s default > the library's.

    ``serve``'s one default: no worker CPU budget (``max_worker_cpu_fraction`` 0) while
    ``CTXUTIL_MAX_WORKER_CPU_FRACTION`` is unset, since a dedicated evaluator process has no request path
    sharing its GIL. The environment is read once, here. Raises :class:`~ctxutil_otel.SettingsError`
    naming the setting and its variable.
    """
    from .._settings import Settings

    return Settings().with_defaults(max_worker_cpu_fraction=0)


def run(args: argparse.Namespace) -> int:
    """``ctxutil-otel serve``: resolve the options, build and start the receiver, serve until a signal;
    the exit status is the module's (0, 1, 2 or ``128 + signal``)."""
    from ..emit._setup import configure_telemetry
    from ..serve import serve_until_signal
    from ._export_tally import ExportTally

    resolved = _resolve(args)
    if resolved is None:
        return 2
    settings, token, tls = resolved
    exports = ExportTally()
    try:
        telemetry = configure_telemetry(console=True, console_format="compact", wrap_exporter=exports.wrap)
    except ValueError as exc:  # unsupported OTEL_* exporter/protocol values, named
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started = _start_receiver(args, settings, token, tls, telemetry)
    if started is None:
        return 2
    receiver, evaluator = started
    announcement = _announcement(args, settings, receiver, telemetry, tls=tls, token=token)
    status = serve_until_signal(receiver, ready=lambda: print(announcement, file=sys.stderr, flush=True))
    _report_stopped(receiver, evaluator, exports)
    return status


def _resolve(args: argparse.Namespace) -> tuple[Settings, str | None, TLSFiles | None] | None:
    """The settings, token and TLS files of ``serve``; ``None`` (after printing the error) for bad
    options."""
    from ..serve import TLSFiles

    if args.grpc_port == 0 and args.http_port == 0:
        print("error: both listeners are disabled (--grpc-port 0 --http-port 0)", file=sys.stderr)
        return None
    try:
        settings = _settings()
        token = _token(args, settings)
    except ValueError as exc:  # settings errors name the setting and its variable (never a secret)
        print(f"error: {exc}", file=sys.stderr)
        return None
    cert = args.tls_cert or settings.serve_tls_cert
    key = args.tls_key or settings.serve_tls_key
    if (cert is None) != (key is None):
        print("error: TLS needs both --tls-cert and --tls-key", file=sys.stderr)
        return None
    tls = TLSFiles(cert_file=cert, key_file=key) if cert is not None and key is not None else None
    return settings, token, tls


def _start_receiver(
    args: argparse.Namespace,
    settings: Settings,
    token: str | None,
    tls: TLSFiles | None,
    telemetry: TelemetryHandle,
) -> tuple[TraceReceiver, Evaluator] | None:
    """Build the emitter, evaluator and receiver and start the receiver's listeners; ``None`` (after
    printing the error and shutting down what was built) when that fails."""
    from ..capture.spans import UtilizationSpanProcessor
    from ..emit._from_settings import build_emitter
    from ..serve import TraceReceiver
    from ..worker._evaluator import Evaluator

    try:
        emitter = build_emitter(
            settings,
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
            logger_provider=telemetry.logger_provider,
        )
        evaluator = Evaluator(emitter=emitter, settings=settings)
        processor = UtilizationSpanProcessor(evaluator)
        receiver = TraceReceiver(
            processor,
            host=args.host,
            grpc_port=args.grpc_port or None,
            http_port=args.http_port or None,
            max_request_bytes=args.max_request_bytes,
            max_connections=args.max_connections,
            header_timeout_s=args.header_timeout,
            request_timeout_s=args.request_timeout,
            min_request_rate=args.min_request_rate,
            tls=tls,
            token=token,
            telemetry=telemetry,
        )
    except Exception as exc:  # settings errors name the setting and its variable (never a secret)
        print(f"error: {exc}", file=sys.stderr)
        telemetry.shutdown()
        return None
    try:
        receiver.start()
    except (OSError, ValueError) as exc:
        print(f"error: cannot start the receiver: {exc}", file=sys.stderr)
        processor.shutdown(0)
        telemetry.shutdown()
        return None
    return receiver, evaluator


def _announcement(
    args: argparse.Namespace,
    settings: Settings,
    receiver: TraceReceiver,
    telemetry: TelemetryHandle,
    *,
    tls: TLSFiles | None,
    token: str | None,
) -> str:
    """The line printed once the listeners are up: addresses, limits, sampling and where results go."""
    listening = []
    if receiver.grpc_port is not None:
        listening.append(f"grpc={receiver.address(receiver.grpc_port)}")
    if receiver.http_port is not None:
        listening.append(f"http={receiver.address(receiver.http_port)}")
    results = ", ".join(f"{k}: {'+'.join(v) or 'nowhere'}" for k, v in telemetry.destinations.items())
    return (
        f"ctxutil-otel serve: listening {' '.join(listening)} tls={'on' if tls else 'off'} "
        f"token={'on' if token else 'off'} max_connections={args.max_connections} "
        f"header_timeout={args.header_timeout:g}s request_timeout={args.request_timeout:g}s "
        f"min_request_rate={args.min_request_rate:g}B/s; "
        f"sample_rate={settings.sample_rate} max_evaluations_per_second={_rate_cap(settings)} "
        f"judge={settings.judge}; "
        f"results -> {results}"
    )


def _rate_cap(settings: Settings) -> str:
    """``CTXUTIL_MAX_EVALUATIONS_PER_SECOND`` as the listening line shows it (0 or unset: no cap)."""
    rate = settings.max_evaluations_per_second
    return "unlimited" if not rate else f"{rate:g}"


def _report_stopped(receiver: TraceReceiver, evaluator: Evaluator, exports: ExportTally) -> None:
    """Print the receiver's and the evaluator's counts once serving has stopped, and the results of its own
    telemetry's exports (``exports``)."""
    stats, evaluated = receiver.stats(), evaluator.stats()
    print(
        f"ctxutil-otel serve: stopped; spans accepted {stats.spans_accepted}, rejected "
        f"{stats.spans_rejected}; requests {dict(sorted(stats.requests.items()))}; evaluator: captured "
        f"{evaluated.captured}, sampled out {evaluated.sampled_out}, not selected {evaluated.not_selected}, "
        f"evaluated {evaluated.evaluated}, "
        f"not applicable {evaluated.not_applicable}, "
        f"dropped {dict(evaluated.dropped)}, failed {dict(evaluated.failed)}; "
        f"telemetry: {exports.describe()}",
        file=sys.stderr,
        flush=True,
    )
