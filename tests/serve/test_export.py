"""``serve`` receives real OTLP exports from the SDK's exporters (gRPC and HTTP) and delivers the evaluation
(span, ``gen_ai.evaluation.result`` log record, metrics) to a second OTLP receiver."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.support.otlp_receiver import OTLPReceiver, attributes_of

from .conftest import RagTrace, Served, expected_result, record_rag_trace


def _exporter(transport: str, served: Served, **kwargs: Any) -> Any:
    if transport == "grpc":
        return GrpcSpanExporter(endpoint=f"http://{served.grpc_target}", insecure=True, **kwargs)
    return HttpSpanExporter(endpoint=f"{served.http_url}/v1/traces", **kwargs)


def _evaluations_of(sink: OTLPReceiver, trace: RagTrace) -> list[Any]:
    return [
        span
        for span in sink.spans("contextual_utilization")
        if int.from_bytes(span.trace_id, "big") == trace.trace_id
    ]


@pytest.mark.parametrize("transport", ["grpc", "http", "http-gzip"])
async def test_real_export_is_evaluated_and_delivered(
    transport: str, make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    kwargs = {"compression": Compression.Gzip} if transport == "http-gzip" else {}
    exporter = _exporter(transport.split("-")[0], served, **kwargs)
    try:
        assert exporter.export(rag_trace.spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    served.flush()

    sink = served.sink
    (evaluation,) = _evaluations_of(sink, rag_trace)
    # Parented to the LLM span of the received trace: it shows inside the application's trace.
    assert int.from_bytes(evaluation.parent_span_id, "big") == rag_trace.llm_span_id
    attributes = attributes_of(evaluation)
    expected = await expected_result()
    assert attributes["gen_ai.evaluation.name"] == "contextual_utilization"
    assert attributes["gen_ai.evaluation.score.label"] == expected.label
    assert attributes["ctxutil.utilization_score"] == pytest.approx(expected.score)
    assert attributes["ctxutil.total_chunks"] == len(rag_trace_chunks(rag_trace))
    assert attributes["ctxutil.total_relevant_chunks"] == expected.signals.total_relevant_chunks
    assert attributes["ctxutil.interaction.source"] == "span_processor"

    records = [
        r
        for r in sink.log_records()
        if r.event_name == "gen_ai.evaluation.result"
        and int.from_bytes(r.trace_id, "big") == rag_trace.trace_id
    ]
    names = sorted(attributes_of(r)["gen_ai.evaluation.name"] for r in records)
    assert names == ["contextual_relevancy", "contextual_utilization"]  # the result and its retrieval half
    assert {int.from_bytes(r.span_id, "big") for r in records} == {rag_trace.llm_span_id}

    (score,) = sink.metrics("gen_ai.evaluation.score")[-1:]
    counts = {attributes_of(p)["gen_ai.evaluation.name"]: p.count for p in score.histogram.data_points}
    assert counts == {"contextual_utilization": 1, "contextual_relevancy": 1}
    outcomes = {
        attributes_of(point).get("outcome"): point.as_int
        for metric in sink.metrics("ctxutil.evaluations")[-1:]
        for point in metric.sum.data_points
    }
    assert outcomes["evaluated"] + outcomes.get("not_applicable", 0) == 1

    stats = served.receiver.stats()
    assert stats.spans_accepted == len(rag_trace.spans) == 3
    assert stats.requests == {"ok": 1}


def rag_trace_chunks(trace: RagTrace) -> list[str]:
    (retriever,) = [s for s in trace.spans if s.name == "VectorStoreRetriever"]
    attributes = retriever.attributes or {}
    return [str(v) for k, v in sorted(attributes.items()) if k.endswith(".document.content")]


def test_sampled_out_traces_cost_nothing_and_emit_nothing(make_served: Callable[..., Served]) -> None:
    served = make_served(sample_rate=0.0)
    exporter = _exporter("http", served)
    try:
        assert exporter.export(record_rag_trace().spans) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    served.flush()
    assert served.sink.spans("contextual_utilization") == []
    stats = served.evaluator.stats()
    assert stats.captured == 0  # decided from the trace id before anything was read (processor rule)
    assert served.receiver.stats().spans_accepted == 3


def test_traces_split_over_requests_are_assembled(make_served: Callable[..., Served]) -> None:
    """A Collector may send a trace's spans in several batches: children first, the root later."""
    served = make_served()
    trace = record_rag_trace()
    children = [s for s in trace.spans if s.parent is not None]
    roots = [s for s in trace.spans if s.parent is None]
    exporter = _exporter("grpc", served)
    try:
        assert exporter.export(children) is SpanExportResult.SUCCESS
        served.flush()
        assert _evaluations_of(served.sink, trace) == []  # the root has not ended yet: still buffered
        assert served.processor.pending_traces == 1
        assert exporter.export(roots) is SpanExportResult.SUCCESS
    finally:
        exporter.shutdown()
    served.flush()
    assert len(_evaluations_of(served.sink, trace)) == 1
    assert served.processor.pending_traces == 0
