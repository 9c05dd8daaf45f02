"""Trace context: an active OpenTelemetry span at the root run's start becomes the interaction's parent.

Real OpenTelemetry SDK providers with in-memory exporters/readers, and the real Emitter on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxutil_otel import ContextualUtilization
from ctxutil_otel.capture import UtilizationCallbackHandler
from ctxutil_otel.emit import Emitter, names
from ctxutil_otel.worker import Evaluator

from .conftest import ANSWER, QUESTION, RecordingJudge, rag_chain

SPAN_EVALUATION = names.SPAN_EVALUATION
SPAN_INTERACTION = names.SPAN_INTERACTION


@dataclass
class Telemetry:
    tracer_provider: TracerProvider
    spans: InMemorySpanExporter
    handler: UtilizationCallbackHandler
    judge: RecordingJudge


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(InMemoryLogRecordExporter()))  # type: ignore[no-untyped-call]
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    emitter = Emitter(
        tracer_provider=tracer_provider, meter_provider=meter_provider, logger_provider=logger_provider
    )
    judge = RecordingJudge()
    evaluator = Evaluator(
        ContextualUtilization(judge=judge), emitter=emitter, sample_rate=1.0, max_evaluations_per_second=0
    )
    yield Telemetry(tracer_provider, spans, UtilizationCallbackHandler(evaluator), judge)
    evaluator.shutdown(5_000)
    for provider in (tracer_provider, meter_provider, logger_provider):
        provider.shutdown()


def _finished(telemetry: Telemetry, name: str) -> list[object]:
    assert telemetry.handler.force_flush(10_000)
    return [span for span in telemetry.spans.get_finished_spans() if span.name == name]


def test_active_span_becomes_the_parent(telemetry: Telemetry) -> None:
    tracer = telemetry.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("app.request") as app_span:
        assert rag_chain().invoke(QUESTION, config={"callbacks": [telemetry.handler]}) == ANSWER
    app_context = app_span.get_span_context()

    (evaluation,) = _finished(telemetry, SPAN_EVALUATION)
    assert evaluation.context.trace_id == app_context.trace_id  # type: ignore[attr-defined]
    assert evaluation.parent is not None and evaluation.parent.span_id == app_context.span_id  # type: ignore[attr-defined]
    assert _finished(telemetry, SPAN_INTERACTION) == []
    assert telemetry.judge.calls[0][0] == QUESTION


async def test_active_span_becomes_the_parent_async(telemetry: Telemetry) -> None:
    tracer = telemetry.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("app.request") as app_span:
        await rag_chain().ainvoke(QUESTION, config={"callbacks": [telemetry.handler]})
    (evaluation,) = _finished(telemetry, SPAN_EVALUATION)
    assert evaluation.parent.span_id == app_span.get_span_context().span_id  # type: ignore[attr-defined]


def test_no_active_span_gives_a_root_interaction_span(telemetry: Telemetry) -> None:
    rag_chain().invoke(QUESTION, config={"callbacks": [telemetry.handler]})
    (interaction_span,) = _finished(telemetry, SPAN_INTERACTION)
    (evaluation,) = _finished(telemetry, SPAN_EVALUATION)
    assert interaction_span.parent is None  # type: ignore[attr-defined]
    assert evaluation.context.trace_id == interaction_span.context.trace_id  # type: ignore[attr-defined]
    # The root span covers the interaction's own start and end (time.time_ns at root start/end).
    assert 0 < interaction_span.start_time <= interaction_span.end_time  # type: ignore[attr-defined]
