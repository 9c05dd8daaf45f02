"""A judge run end to end: the worker (:class:`~ctxutil_otel.worker.Evaluator`) evaluating with the metric
and emitting through the real :class:`~ctxutil_otel.emit.Emitter` onto non-global OpenTelemetry SDK
providers with in-memory exporters; used by the judge tests and the real-server tier."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxutil_otel._interaction import Interaction
from ctxutil_otel.emit import Emitter
from ctxutil_otel.emit._names import METRIC_JUDGE_TOKENS, SPAN_EVALUATION
from ctxutil_otel.judges import Judge
from ctxutil_otel.metric import ContextualUtilization, EvaluationMode
from ctxutil_otel.worker import Evaluator, EvaluatorStats

__all__ = ["WorkerRun", "run_through_worker"]


@dataclass
class WorkerRun:
    """What the worker emitted: evaluation spans, ``ctxutil.judge.tokens`` by token type, and stats."""

    spans: list[ReadableSpan]
    tokens: dict[str, int]
    stats: EvaluatorStats

    def attributes(self) -> list[dict[str, Any]]:
        return [dict(span.attributes or {}) for span in self.spans]


def run_through_worker(
    judge: Judge,
    items: Sequence[tuple[str, str, Sequence[str]]],
    *,
    mode: EvaluationMode = EvaluationMode.GRANULAR,
    timeout_ms: int = 60_000,
    **settings: Any,
) -> WorkerRun:
    """Submit ``(query, answer, chunks)`` interactions to an Evaluator, wait for them, shut it down."""
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    logger_provider = LoggerProvider(shutdown_on_exit=False)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(InMemoryLogRecordExporter()))
    emitter = Emitter(
        tracer_provider=tracer_provider, meter_provider=meter_provider, logger_provider=logger_provider
    )
    settings.setdefault("max_evaluations_per_second", 0)
    evaluator = Evaluator(ContextualUtilization(judge=judge, mode=mode), emitter=emitter, **settings)
    try:
        for query, answer, chunks in items:
            item = Interaction(
                query=query, answer=answer, documents=list(chunks), trace_id=random.getrandbits(128)
            )
            assert evaluator.admit(item.trace_id).submit(item)
        assert evaluator.force_flush(timeout_ms), "the worker did not finish in time"
    finally:
        evaluator.shutdown(timeout_ms)
    tokens: dict[str, int] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == METRIC_JUDGE_TOKENS:
                    for point in metric.data.data_points:
                        kind = str((point.attributes or {}).get("gen_ai.token.type"))
                        tokens[kind] = tokens.get(kind, 0) + int(point.value)
    finished = [s for s in spans.get_finished_spans() if s.name == SPAN_EVALUATION]
    stats = evaluator.stats()
    for provider in (tracer_provider, meter_provider, logger_provider):
        provider.shutdown()
    return WorkerRun(spans=finished, tokens=tokens, stats=stats)
