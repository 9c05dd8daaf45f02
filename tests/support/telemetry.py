"""Real OpenTelemetry SDK providers whose output a test reads back in memory (none of them global).

``telemetry`` (a fixture; a test folder's conftest re-exports it with
``from tests.support.telemetry import telemetry as telemetry``): a :class:`Telemetry` holding a
``TracerProvider`` (``SimpleSpanProcessor`` -> ``InMemorySpanExporter``), a ``MeterProvider``
(``InMemoryMetricReader``) and a ``LoggerProvider`` (``SimpleLogRecordProcessor`` ->
``InMemoryLogRecordExporter``), shut down after the test; ``telemetry.emitter(...)`` is an
:class:`~ctxutil_otel.emit.Emitter` on those three. :func:`make_telemetry` builds one the caller shuts down.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Metric
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext

from ctxutil_otel import Evaluator
from ctxutil_otel.emit import Emitter
from ctxutil_otel.emit import names as _names

__all__ = ["Telemetry", "make_telemetry", "telemetry"]

UTILIZATION = _names.EVALUATION_CONTEXTUAL_UTILIZATION
EVALUATION_NAME = _names.ATTR_EVALUATION_NAME


@dataclass
class Telemetry:
    """Three non-global SDK providers whose output the test reads back in memory."""

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    span_exporter: InMemorySpanExporter
    metric_reader: InMemoryMetricReader
    log_exporter: InMemoryLogRecordExporter

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        """Finished spans, optionally only those called ``name``."""
        return [s for s in self.span_exporter.get_finished_spans() if name is None or s.name == name]

    def logs(self, evaluation: str | None = UTILIZATION) -> list[ReadableLogRecord]:
        """Finished log records; by default only the utilization results (each evaluation with verdicts
        also emits a ``contextual_relevancy`` event); ``evaluation=None``: all of them."""
        return [
            r
            for r in self.log_exporter.get_finished_logs()
            if evaluation is None
            or (r.log_record.attributes or {}).get(EVALUATION_NAME, evaluation) == evaluation
        ]

    def metrics(self) -> dict[str, Metric]:
        """Collect now; ``{instrument name: Metric}`` across all scopes."""
        data = self.metric_reader.get_metrics_data()
        out: dict[str, Metric] = {}
        if data is None:
            return out
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    out[metric.name] = metric
        return out

    def points(self, name: str, evaluation: str | None = UTILIZATION) -> list[Any]:
        """Data points of metric ``name`` in one fresh collection (empty list when absent); by default
        without the points of other evaluations (the ``contextual_relevancy`` score points);
        ``evaluation=None``: all of them."""
        metric = self.metrics().get(name)
        if metric is None:
            return []
        return [
            p
            for p in metric.data.data_points
            if evaluation is None or (p.attributes or {}).get(EVALUATION_NAME, evaluation) == evaluation
        ]

    def emitter(self, **kwargs: Any) -> Emitter:
        """An Emitter on these three providers; ``kwargs`` are the other Emitter arguments."""
        return Emitter(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            logger_provider=self.logger_provider,
            **kwargs,
        )

    def evaluator(self, **settings: Any) -> Evaluator:
        """An Evaluator emitting on these three providers: the lexical judge, every call sampled and no rate
        cap unless ``settings`` (the other Evaluator arguments) say otherwise."""
        return Evaluator(
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            logger_provider=self.logger_provider,
            **{"judge": "lexical", "sample_rate": 1.0, "max_evaluations_per_second": 0, **settings},
        )

    def evaluated_span(self, name: str = "rag.chain") -> SpanContext:
        """Start and end a real span (the "evaluated" span of a RAG chain) and return its context."""
        span = self.tracer_provider.get_tracer("tests.app").start_span(name)
        span.end()
        return span.get_span_context()


def make_telemetry() -> Telemetry:
    """Real SDK providers with in-memory exporters and reader (the caller shuts them down)."""
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


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    made = make_telemetry()
    yield made
    made.tracer_provider.shutdown()
    made.meter_provider.shutdown()
    made.logger_provider.shutdown()
