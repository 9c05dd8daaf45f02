"""TelemetryHandle.shutdown: each signal exported exactly once, within the deadline; OTLP export timeouts.

Real SDK parts throughout: the providers ``configure_telemetry`` builds, its compact console exporters,
``PeriodicExportingMetricReader`` and ``BatchSpanProcessor``. The two small exporters below are test parts
standing in for a backend (one counts export calls, one blocks until released) where no real one can show
that; they implement the SDK's exporter interfaces.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from ctxutil_otel.emit import configure_telemetry


class CountingMetricExporter(MetricExporter):
    """Counts export calls (a stand-in for a backend receiving points)."""

    def __init__(self) -> None:
        super().__init__()
        self.exports: list[MetricsData] = []

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object
    ) -> MetricExportResult:
        self.exports.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        pass


class BlockingSpanExporter(SpanExporter):
    """Blocks every export until ``release`` is set (a backend that does not answer)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(30)
        return SpanExportResult.SUCCESS


def test_shutdown_prints_each_metric_point_and_span_once() -> None:
    out = io.StringIO()
    handle = configure_telemetry(console_out=out, console_format="compact", service_name="svc")
    handle.meter_provider.get_meter("tests").create_counter("tests.requests").add(3, {"route": "a"})
    handle.tracer_provider.get_tracer("tests").start_span("work").end()
    assert out.getvalue() == ""  # nothing exported before shutdown (60 s metric interval, batched spans)
    assert handle.shutdown(5000) is True
    printed = out.getvalue()
    assert printed.count("[metric] tests.requests {route=a} 3") == 1
    assert printed.count("[span] work ") == 1


@pytest.mark.parametrize("how", ["environment", "argument"])
def test_an_infinite_metric_interval_still_exports_once_at_shutdown(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    # OTEL_METRIC_EXPORT_INTERVAL=inf: the SDK's reader runs no thread and collects on force_flush only.
    kwargs: dict[str, float] = {}
    if how == "environment":
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "inf")
    else:
        kwargs["metric_export_interval_millis"] = float("inf")
    out = io.StringIO()
    handle = configure_telemetry(console_out=out, console_format="compact", **kwargs)
    handle.meter_provider.get_meter("tests").create_counter("tests.requests").add(2)
    assert handle.shutdown(5000) is True
    assert out.getvalue().count("[metric] tests.requests {} 2") == 1


def test_shutdown_exports_one_collection_per_periodic_reader() -> None:
    exporter = CountingMetricExporter()
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=60_000)
    handle = configure_telemetry(console=False, metric_readers=[reader])
    handle.meter_provider.get_meter("tests").create_counter("tests.requests").add(1)
    assert handle.shutdown(5000) is True
    assert len(exporter.exports) == 1
    names = [
        m.name for rm in exporter.exports[0].resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    ]
    assert names == ["tests.requests"]


def test_force_flush_then_shutdown_is_what_exported_twice() -> None:
    """The control: an explicit force_flush is one more collection, so callers must not pair the two."""
    exporter = CountingMetricExporter()
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=60_000)
    handle = configure_telemetry(console=False, metric_readers=[reader])
    handle.meter_provider.get_meter("tests").create_counter("tests.requests").add(1)
    assert handle.force_flush(5000) is True
    assert handle.shutdown(5000) is True
    assert len(exporter.exports) == 2


def test_shutdown_returns_false_at_the_deadline_when_an_export_hangs() -> None:
    exporter = BlockingSpanExporter()
    handle = configure_telemetry(console=False, span_processors=[BatchSpanProcessor(exporter)])
    handle.tracer_provider.get_tracer("tests").start_span("stuck").end()
    try:
        # The tracer provider's shutdown waits for the blocked export; the handle gives up at its deadline.
        assert handle.shutdown(200) is False
        assert exporter.entered.is_set()
    finally:
        exporter.release.set()


@pytest.mark.parametrize(
    ("env", "argument", "expected"),
    [
        ({}, None, 10.0),  # the OTLP exporters' own default
        ({}, 2.5, 2.5),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "7"}, 2.5, 7.0),  # the user's value wins
        ({"OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "12"}, 2.5, 12.0),  # the longest signal's
    ],
)
def test_otlp_timeout_respects_the_users_variable(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], argument: float | None, expected: float
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # nothing is exported
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    handle = configure_telemetry(console=False, otlp_timeout_s=argument)
    try:
        assert handle.otlp_timeout_s == expected
    finally:
        assert handle.shutdown(5000)


def test_no_otlp_means_no_otlp_timeout() -> None:
    handle = configure_telemetry(console=False, otlp_timeout_s=3.0)
    assert handle.otlp_timeout_s is None
    assert handle.shutdown(5000)
