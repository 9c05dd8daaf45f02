"""``configure_telemetry``: tracer, meter and logger providers with exporters chosen from the environment.

For the CLI, the demo and examples. Applications that already configure OpenTelemetry do not need it: the
:class:`~ctxutil_otel.emit.Emitter` uses whatever global providers they set.

Which exporter each signal gets (OTLP over gRPC or HTTP, the console, nothing) is decided in
``_exporter_choice.py``; this module builds the providers, processors and readers around them.
"""

from __future__ import annotations

import atexit
import logging
import math
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    ConsoleLogRecordExporter,
    LogRecordExporter,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.util.types import AttributeValue

from ._console import format_log_record, format_metrics, format_span
from ._exporter_choice import SIGNALS, env_value, exporter_destinations, otlp_exporters, otlp_timeout_from_env

__all__ = ["DEFAULT_SERVICE_NAME", "TelemetryHandle", "configure_telemetry"]

_log = logging.getLogger("ctxutil_otel.emit")

DEFAULT_SERVICE_NAME = "ctxutil-otel"
#: Per signal, in the order of ``SIGNALS``: the console exporter and its compact formatter.
_CONSOLE_EXPORTERS: tuple[tuple[Any, Callable[..., str]], ...] = (
    (ConsoleSpanExporter, format_span),
    (ConsoleMetricExporter, format_metrics),
    (ConsoleLogRecordExporter, format_log_record),
)
_SDK_OTLP_TIMEOUT_S = 10.0  # the OTLP exporters' default when no OTEL_EXPORTER_OTLP_*TIMEOUT is set


@dataclass(kw_only=True)
class TelemetryHandle:
    """The providers :func:`configure_telemetry` built, and where each signal goes.

    Attributes:
        tracer_provider / meter_provider / logger_provider: The SDK providers (pass them to
            :class:`~ctxutil_otel.emit.Emitter`, or use the globals when ``is_global``).
        destinations: ``{"traces" | "metrics" | "logs": ("otlp/grpc" | "otlp/http" | "console", ...)}``;
            an empty tuple means the signal is exported nowhere.
        span_exporters / metric_exporters / log_exporters: The exporter instances, in that order.
        is_global: The providers were installed as the OpenTelemetry globals.
        otlp_timeout_s: The longest export timeout of the OTLP exporters in seconds (the user's
            ``OTEL_EXPORTER_OTLP_*TIMEOUT``, else ``configure_telemetry(otlp_timeout_s=...)``, else the
            SDK's 10 s); ``None`` when no signal goes over OTLP.
    """

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    destinations: Mapping[str, tuple[str, ...]]
    span_exporters: tuple[SpanExporter, ...] = ()
    metric_exporters: tuple[MetricExporter, ...] = ()
    log_exporters: tuple[LogRecordExporter, ...] = ()
    is_global: bool = False
    otlp_timeout_s: float | None = None
    _shut_down: bool = field(default=False, repr=False)
    # The exporting readers built here have an infinite interval (OTEL_METRIC_EXPORT_INTERVAL=inf): the
    # SDK's reader then has no thread and collects on force_flush only, not at shutdown.
    _collect_at_shutdown: bool = field(default=False, repr=False)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Export everything buffered in the three providers within ``timeout_millis`` (shared deadline).

        Returns ``True`` when all three flushed in time. Never raises.
        """
        deadline = time.monotonic() + timeout_millis / 1000
        ok = True
        for provider in (self.tracer_provider, self.meter_provider, self.logger_provider):
            remaining = max(0, int((deadline - time.monotonic()) * 1000))
            try:
                ok = bool(provider.force_flush(remaining)) and ok
            except Exception:
                _log.debug("force_flush of %s failed", type(provider).__name__, exc_info=True)
                ok = False
        return ok

    def shutdown(self, timeout_millis: int = 30000) -> bool:
        """Export what is buffered, once per signal, and shut the three providers down within
        ``timeout_millis`` (idempotent; also registered with ``atexit``).

        No ``force_flush`` precedes the shutdowns: the SDK's batch span and log processors export their
        queues as they shut down, and ``MeterProvider.shutdown`` makes each ``PeriodicExportingMetricReader``
        run one last collection and export (``opentelemetry/sdk/metrics/_internal/export/__init__.py``), so
        a flush first would export every metric twice (two identical cumulative points). The three
        providers shut down in parallel daemon threads that share the deadline, so one slow or unreachable
        backend does not take the time of the others, and the call returns by the deadline even though the
        SDK's tracer and logger provider shutdowns take no timeout (an export still running then is
        abandoned at interpreter exit; the OTLP exporters' own timeout, ``OTEL_EXPORTER_OTLP_TIMEOUT``,
        bounds their retries). Returns ``True`` when all three finished in time without error. Never raises.
        """
        if self._shut_down:
            return True
        self._shut_down = True
        atexit.unregister(self.shutdown)
        deadline = time.monotonic() + timeout_millis / 1000
        failed: list[str] = []

        def remaining_ms() -> float:
            return max(0.0, (deadline - time.monotonic()) * 1000)

        def close(name: str, shutdown: Callable[[], object]) -> None:
            try:
                shutdown()
            except Exception:
                _log.debug("shutdown of %s failed", name, exc_info=True)
                failed.append(name)

        jobs: list[tuple[str, Callable[[], object]]] = [
            ("tracer_provider", self.tracer_provider.shutdown),
            ("logger_provider", self.logger_provider.shutdown),
            ("meter_provider", self._shutdown_meters(remaining_ms)),
        ]
        threads = []
        for name, job in jobs:
            thread = threading.Thread(target=close, args=(name, job), name=f"ctxutil-{name}", daemon=True)
            try:
                thread.start()
            except RuntimeError:  # no new threads (interpreter finalising): shut down in this thread
                close(name, job)
                continue
            threads.append(thread)
        for thread in threads:
            thread.join(remaining_ms() / 1000)
        late = [t.name for t in threads if t.is_alive()]
        if late:
            _log.debug("telemetry shutdown deadline (%d ms) passed: %s", timeout_millis, ", ".join(late))
        return not late and not failed

    def _shutdown_meters(self, remaining_ms: Callable[[], float]) -> Callable[[], object]:
        def shutdown() -> None:
            if self._collect_at_shutdown:  # once: these readers do not collect at shutdown themselves
                self.meter_provider.force_flush(remaining_ms())
            self.meter_provider.shutdown(remaining_ms())

        return shutdown


def _infinite_interval(millis: float | None) -> bool:
    """Whether the exporting readers' interval (the argument, else ``OTEL_METRIC_EXPORT_INTERVAL``, as
    the SDK reads it) is infinite, so that they export on ``force_flush`` only."""
    if millis is None:
        raw = env_value("OTEL_METRIC_EXPORT_INTERVAL")
        try:
            millis = float(raw) if raw is not None else None
        except ValueError:
            return False
    return millis is not None and math.isinf(millis)


def configure_telemetry(
    *,
    service_name: str | None = None,
    console: bool = True,
    console_out: IO[str] | None = None,
    console_format: str = "json",
    set_global: bool = False,
    resource_attributes: Mapping[str, AttributeValue] | None = None,
    metric_export_interval_millis: float | None = None,
    metric_readers: Sequence[MetricReader] = (),
    span_processors: Sequence[SpanProcessor] = (),
    log_record_processors: Sequence[LogRecordProcessor] = (),
    otlp_timeout_s: float | None = None,
    wrap_exporter: Callable[[Any], Any] | None = None,
) -> TelemetryHandle:
    """Build a TracerProvider, MeterProvider and LoggerProvider exporting per the environment.

    Args:
        service_name: ``service.name`` of the Resource. Precedence: this argument > ``OTEL_SERVICE_NAME`` >
            ``service.name`` in ``OTEL_RESOURCE_ATTRIBUTES`` > ``"ctxutil-otel"``.
        console: For a signal without OTLP configuration, print it to the console (``True``) or export it
            nowhere (``False``: quiet mode, e.g. the demo's summary-only output).
        console_out: Stream of the console exporters (default: ``sys.stdout`` at call time).
        console_format: ``"json"`` (the SDK's indented JSON) or ``"compact"`` (one line per span, log
            record and metric point; :mod:`ctxutil_otel.emit._console`).
        set_global: Install the providers as the OpenTelemetry globals. Off by default so an application's
            own providers are never clobbered; the API refuses a second global anyway (``is_global`` then
            stays ``False`` and a warning is logged).
        resource_attributes: Extra Resource attributes (the arguments win over ``OTEL_RESOURCE_ATTRIBUTES``).
        metric_export_interval_millis: Period of the exporting metric readers (default: the SDK's,
            ``OTEL_METRIC_EXPORT_INTERVAL`` or 60000 ms). ``force_flush``/``shutdown`` export everything.
        metric_readers / span_processors / log_record_processors: Added as well (e.g. a
            ``PrometheusMetricReader`` or in-memory readers).
        otlp_timeout_s: Timeout of each OTLP export request, seconds (retries included), used only where
            the user set neither ``OTEL_EXPORTER_OTLP_{SIGNAL}_TIMEOUT`` nor ``OTEL_EXPORTER_OTLP_TIMEOUT``
            (seconds, as the Python exporters read them); ``None``: the exporters' default (10 s).
        wrap_exporter: Called with each exporter built (a ``SpanExporter``, ``MetricExporter`` or
            ``LogRecordExporter``); what it returns is used instead (e.g. a delegating exporter that
            counts export results, as the last lines of ``demo`` and ``serve`` do). Default: the
            exporters as built.

    Returns:
        A :class:`TelemetryHandle`; call ``shutdown()`` when done (also registered with ``atexit``).

    Raises:
        ValueError: naming the environment variable, for unsupported exporter or protocol values.
    """
    if console_format not in ("json", "compact"):
        raise ValueError(f"console_format must be 'json' or 'compact', got {console_format!r}")
    destinations = exporter_destinations(console)
    out = console_out if console_out is not None else sys.stdout
    exporters, longest_timeout = _exporters(destinations, out, console_format == "compact", otlp_timeout_s)
    if wrap_exporter is not None:
        exporters = {signal: [wrap_exporter(e) for e in built] for signal, built in exporters.items()}
    span_exporters: list[SpanExporter] = exporters["traces"]
    metric_exporters: list[MetricExporter] = exporters["metrics"]
    log_exporters: list[LogRecordExporter] = exporters["logs"]

    resource = _resource(service_name, resource_attributes)
    handle = TelemetryHandle(
        tracer_provider=_tracer_provider(resource, span_exporters, span_processors),
        meter_provider=_meter_provider(
            resource, metric_exporters, metric_readers, metric_export_interval_millis
        ),
        logger_provider=_logger_provider(resource, log_exporters, log_record_processors),
        destinations=destinations,
        span_exporters=tuple(span_exporters),
        metric_exporters=tuple(metric_exporters),
        log_exporters=tuple(log_exporters),
        otlp_timeout_s=longest_timeout,
        _collect_at_shutdown=bool(metric_exporters) and _infinite_interval(metric_export_interval_millis),
    )
    if set_global:
        _install_globally(handle)
    atexit.register(handle.shutdown)
    return handle


def _tracer_provider(
    resource: Resource, exporters: Sequence[SpanExporter], processors: Sequence[SpanProcessor]
) -> TracerProvider:
    """A TracerProvider with a batch processor per exporter, then the caller's processors."""
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    for processor in processors:
        provider.add_span_processor(processor)
    return provider


def _meter_provider(
    resource: Resource,
    exporters: Sequence[MetricExporter],
    extra_readers: Sequence[MetricReader],
    export_interval_millis: float | None,
) -> MeterProvider:
    """A MeterProvider with a periodic exporting reader per exporter, then the caller's readers."""
    readers: list[MetricReader] = [
        PeriodicExportingMetricReader(exporter, export_interval_millis=export_interval_millis)
        for exporter in exporters
    ]
    readers.extend(extra_readers)
    return MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)


def _logger_provider(
    resource: Resource, exporters: Sequence[LogRecordExporter], processors: Sequence[LogRecordProcessor]
) -> LoggerProvider:
    """A LoggerProvider with a batch processor per exporter, then the caller's processors."""
    provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    for exporter in exporters:
        provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    for processor in processors:
        provider.add_log_record_processor(processor)
    return provider


def _exporters(
    destinations: Mapping[str, Sequence[str]], out: IO[str], compact: bool, otlp_timeout_s: float | None
) -> tuple[dict[str, list[Any]], float | None]:
    """One exporter per signal and destination (``console``, or an OTLP protocol), and the longest OTLP
    export timeout among them (``None`` without OTLP): see :func:`configure_telemetry`."""
    exporters: dict[str, list[Any]] = {signal: [] for signal in SIGNALS}
    longest_timeout: float | None = None
    for signal, targets in destinations.items():
        position = SIGNALS.index(signal)
        for target in targets:
            if target == "console":
                console_cls, formatter = _CONSOLE_EXPORTERS[position]
                exporters[signal].append(
                    console_cls(out=out, formatter=formatter) if compact else console_cls(out=out)
                )
                continue
            otlp_cls = otlp_exporters(target)[position]
            user_timeout = otlp_timeout_from_env(signal)
            timeout = user_timeout if user_timeout is not None else otlp_timeout_s
            effective = timeout if timeout is not None else _SDK_OTLP_TIMEOUT_S
            longest_timeout = max(longest_timeout or 0.0, effective)
            kwargs = {} if user_timeout is not None or timeout is None else {"timeout": timeout}
            exporters[signal].append(otlp_cls(**kwargs))
    return exporters, longest_timeout


def _install_globally(handle: TelemetryHandle) -> None:
    """Install the handle's providers as the OpenTelemetry globals; ``is_global`` says whether the API
    took all three (it refuses a second global: then a warning says so)."""
    trace.set_tracer_provider(handle.tracer_provider)
    metrics.set_meter_provider(handle.meter_provider)
    _logs.set_logger_provider(handle.logger_provider)
    handle.is_global = (
        trace.get_tracer_provider() is handle.tracer_provider
        and metrics.get_meter_provider() is handle.meter_provider
        and _logs.get_logger_provider() is handle.logger_provider
    )
    if not handle.is_global:
        _log.warning(
            "configure_telemetry(set_global=True): OpenTelemetry global providers were already set; "
            "pass the handle's providers to the Emitter instead"
        )


def _resource(service_name: str | None, extra: Mapping[str, AttributeValue] | None) -> Resource:
    attributes: dict[str, AttributeValue] = dict(extra or {})
    if service_name:
        attributes[SERVICE_NAME] = service_name
    resource = Resource.create(attributes)
    if not service_name and str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    return resource
