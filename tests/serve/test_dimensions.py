"""Dimensions through ``serve`` (issue 12 item 2): a real OTLP/HTTP export of a GenAI-convention RAG trace;
the evaluation span, both ``gen_ai.evaluation.result`` events and the score points that reach the sink name
the answering model and provider (span attributes), the chain and retriever (span names), a
``metric_dimensions`` key (a span attribute) and the sender (its Resource)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.support.otlp_receiver import attributes_of

from .conftest import ANSWER, CHUNKS, QUERY, Served

EXPECTED = {
    "gen_ai.request.model": "gpt-4o-mini-2024",
    "gen_ai.provider.name": "openai",
    "ctxutil.chain.name": "invoke_workflow faq",
    "ctxutil.retriever.name": "retrieval shop-docs",
    "ctxutil.metadata.prompt_version": "v7",
    "ctxutil.evaluated.service.name": "shop-rag",
}


def _genai_trace() -> list[ReadableSpan]:
    """A GenAI-convention RAG trace (workflow > retrieval + chat) recorded with a real SDK tracer."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "shop-rag"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("app")
    documents = json.dumps([{"id": f"d{i}", "content": text} for i, text in enumerate(CHUNKS)])
    with tracer.start_as_current_span(
        "invoke_workflow faq",
        attributes={"gen_ai.operation.name": "invoke_workflow", "prompt_version": "v7"},
    ):
        with tracer.start_as_current_span(
            "retrieval shop-docs",
            attributes={
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": QUERY,
                "gen_ai.retrieval.documents": documents,
            },
        ):
            pass
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini-2024",
                "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                "gen_ai.input.messages": json.dumps(
                    [{"role": "user", "parts": [{"type": "text", "content": QUERY}]}]
                ),
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]
                ),
            },
        ):
            pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def _dims(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: attributes.get(k) for k in EXPECTED}


def test_dimensions_reach_the_sink_through_serve(make_served: Callable[..., Served]) -> None:
    served = make_served(metric_dimensions=("prompt_version",))
    exporter = OTLPSpanExporter(endpoint=f"{served.http_url}/v1/traces")
    try:
        assert exporter.export(_genai_trace()) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    served.flush()
    sink = served.sink
    (evaluation,) = sink.spans("contextual_utilization")
    assert _dims(attributes_of(evaluation)) == EXPECTED
    events = {attributes_of(r)["gen_ai.evaluation.name"]: attributes_of(r) for r in sink.log_records()}
    assert set(events) == {"contextual_utilization", "contextual_relevancy"}
    for attributes in events.values():
        assert _dims(attributes) == EXPECTED
    (score,) = sink.metrics("gen_ai.evaluation.score")[-1:]
    for point in score.histogram.data_points:
        assert _dims(attributes_of(point)) == EXPECTED
