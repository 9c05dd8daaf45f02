"""Fixtures for the instrumentor tests: real SDK providers with in-memory exporters (not global), and a
guard that every test leaves LangChain's configure hooks as it found them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.tracers import context as tracer_context
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxutil_otel.capture import CtxutilInstrumentor
from tests.emit.conftest import Telemetry
from tests.emit.conftest import telemetry as telemetry  # re-exported fixture

__all__ = ["Telemetry", "make_telemetry"]


def make_telemetry() -> Telemetry:
    """Providers like the ``telemetry`` fixture's, for a wider-scoped fixture (the caller shuts them down)."""
    span_exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    metric_reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[metric_reader], shutdown_on_exit=False)
    log_exporter = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider(shutdown_on_exit=False)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    return Telemetry(
        tracer_provider, meter_provider, logger_provider, span_exporter, metric_reader, log_exporter
    )


@pytest.fixture(autouse=True)
def _hooks_left_as_found() -> Iterator[None]:
    """Every test leaves LangChain's configure hooks as it found them (the environment is cleaned
    suite-wide by tests/conftest.py)."""
    hooks_before = list(tracer_context._configure_hooks)
    yield
    CtxutilInstrumentor().uninstrument()  # a no-op when the test already did
    assert tracer_context._configure_hooks == hooks_before, "the instrumentor left a configure hook behind"
