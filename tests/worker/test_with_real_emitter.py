"""The evaluator with the real ``ctxutil_otel.emit.Emitter`` on the real OpenTelemetry SDK, read back
through in-memory exporters and readers (no global providers are touched)."""

from __future__ import annotations

import dataclasses
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

from ctxutil_otel.emit import Emitter
from ctxutil_otel.judges import LexicalJudge
from ctxutil_otel.metric import ContextualUtilization

from .conftest import MakeEvaluator, interaction


@dataclass
class _Providers:
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    logs: InMemoryLogRecordExporter

    def points(self, name: str) -> dict[frozenset[tuple[str, object]], int | float]:
        data = self.metrics.get_metrics_data()
        out: dict[frozenset[tuple[str, object]], int | float] = {}
        if data is None:
            return out
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            out[frozenset((point.attributes or {}).items())] = point.value  # type: ignore[union-attr]
        return out


@pytest.fixture
def providers() -> Iterator[_Providers]:
    spans, metrics = InMemorySpanExporter(), InMemoryMetricReader()
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[metrics], shutdown_on_exit=False)
    logger_provider = LoggerProvider(shutdown_on_exit=False)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    yield _Providers(tracer_provider, meter_provider, logger_provider, spans, metrics, logs)
    tracer_provider.shutdown()
    meter_provider.shutdown()
    logger_provider.shutdown()


def test_results_become_spans_log_records_and_outcome_metrics(
    make_evaluator: MakeEvaluator, providers: _Providers
) -> None:
    emitter = Emitter(
        tracer_provider=providers.tracer_provider,
        meter_provider=providers.meter_provider,
        logger_provider=providers.logger_provider,
        application_name="shop-rag",
    )
    evaluator = make_evaluator(ContextualUtilization(judge=LexicalJudge()), emitter=emitter)
    app = providers.tracer_provider.get_tracer("tests.app")
    parents = []
    for kind in ("ok", "ok", "ok", "no_answer", "bad_chunk", "discard"):
        with app.start_as_current_span("rag.chain") as span:
            context = span.get_span_context()
        parents.append(context)
        ticket = evaluator.admit(context.trace_id)
        assert ticket
        if kind == "discard":
            ticket.drop("chain_error")
            continue
        item = interaction(context.trace_id, answer=None if kind == "no_answer" else "Python is a language")
        if kind == "bad_chunk":
            item = interaction(context.trace_id, documents=["fine", 3.5])
        ticket.submit(dataclasses.replace(item, parent=context, id=f"run-{kind}-{len(parents)}"))
    assert evaluator.force_flush(5000)

    evaluations = [s for s in providers.spans.get_finished_spans() if s.name == "contextual_utilization"]
    assert len(evaluations) == 4  # 3 scored + 1 invalid_input error; not_evaluable emits nothing
    chain_spans = {c.span_id: c for c in parents}
    for evaluation in evaluations:
        assert evaluation.parent is not None and evaluation.parent.span_id in chain_spans
        assert evaluation.context is not None
        assert evaluation.context.trace_id == chain_spans[evaluation.parent.span_id].trace_id
    errors = [s for s in evaluations if (s.attributes or {}).get("error.type") == "invalid_input"]
    assert len(errors) == 1

    records = providers.logs.get_finished_logs()
    assert {r.log_record.event_name for r in records} == {"gen_ai.evaluation.result"}
    names = [(r.log_record.attributes or {}).get("gen_ai.evaluation.name") for r in records]
    # every result, and the retrieval half of the 3 with verdicts (none for the error)
    assert (names.count("contextual_utilization"), names.count("contextual_relevancy")) == (4, 3)

    stats = evaluator.stats()
    observed = providers.points("ctxutil.evaluations")
    expected: dict[frozenset[tuple[str, object]], int] = {}
    for (outcome, detail), n in stats.outcomes().items():
        attributes: dict[str, object] = {"outcome": outcome, "ctxutil.application.name": "shop-rag"}
        if outcome == "failed":
            attributes["error.type"] = detail
        elif outcome == "dropped":
            attributes["reason"] = detail
        expected[frozenset(attributes.items())] = n
    assert observed == expected
    assert stats.dropped == {"not_evaluable": 1, "chain_error": 1}
    assert stats.failed == {"invalid_input": 1}
    assert providers.points("ctxutil.queue.size") == {
        frozenset({("ctxutil.application.name", "shop-rag")}): 0
    }


def test_default_emitter_is_built_from_settings(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(
        emitter=None, capture_content=True, application_name="docs-bot", max_content_chars=123
    )
    emitter = evaluator.emitter
    assert isinstance(emitter, Emitter)
    assert (emitter.capture_content, emitter.application_name, emitter.max_content_chars) == (
        True,
        "docs-bot",
        123,
    )
