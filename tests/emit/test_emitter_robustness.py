"""The emitter never raises, and a failing attribute extractor loses only its own attribute."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxutil_otel.capture import Interaction
from ctxutil_otel.emit import Emitter
from ctxutil_otel.emit import names as n
from ctxutil_otel.judges import TokenUsage
from ctxutil_otel.metric import ChunkResult

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, make_interaction


def test_a_failing_extractor_loses_only_its_attribute(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    good = evaluate(GREEN_TEA, GREEN_TEA_MARKS, usage=TokenUsage(input_tokens=10, output_tokens=2))
    # model_copy(update=...) skips validation: a corrupted field, as a buggy producer might hand over.
    broken = good.model_copy(
        update={
            "threshold": "half",
            "usage": TokenUsage.model_construct(input_tokens="many", output_tokens=2),
        }
    )
    emitter = telemetry.emitter()
    with caplog.at_level(logging.DEBUG, logger="ctxutil_otel.emit"):
        emitter.emit(make_interaction(parent=telemetry.evaluated_span()), broken, 0.1)
        emitter.emit(make_interaction(parent=telemetry.evaluated_span()), broken, 0.1)

    first, _second = telemetry.spans(n.SPAN_EVALUATION)
    attrs = dict(first.attributes or {})
    assert n.ATTR_THRESHOLD not in attrs
    assert n.ATTR_JUDGE_INPUT_TOKENS not in attrs
    assert attrs[n.ATTR_JUDGE_OUTPUT_TOKENS] == 2
    assert attrs[n.ATTR_EVALUATION_SCORE_VALUE] == pytest.approx(2 / 3)
    assert attrs[n.ATTR_TOTAL_RELEVANT_CHUNKS] == 3
    # The rest of the pipeline still ran: log record and score histogram.
    assert len(telemetry.logs()) == 2
    assert telemetry.points(n.METRIC_EVALUATION_SCORE)[0].count == 2
    # Each failure counted every time, logged once.
    assert emitter.failures[n.ATTR_THRESHOLD] == 2  # one extraction per emit, shared by span and log
    threshold_logs = [r for r in caplog.records if n.ATTR_THRESHOLD in r.getMessage()]
    assert len(threshold_logs) == 1


def test_a_bad_chunk_verdict_loses_only_that_field(telemetry: Telemetry) -> None:
    good = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    verdicts = list(good.signals.verdicts)
    verdicts[1] = ChunkResult.model_construct(index=1, is_relevant="yes", is_utilized=True, reason="")
    broken = good.model_copy(update={"signals": good.signals.model_copy(update={"verdicts": verdicts})})
    telemetry.emitter().emit(make_interaction(parent=telemetry.evaluated_span()), broken, 0.1)
    attrs = dict(telemetry.spans(n.SPAN_EVALUATION)[0].attributes or {})
    assert n.chunk_attribute(1, n.CHUNK_IS_RELEVANT) not in attrs
    assert attrs[n.chunk_attribute(1, n.CHUNK_IS_UTILIZED)] is True
    assert attrs[n.chunk_attribute(1, n.CHUNK_INDEX)] == 1
    assert attrs[n.chunk_attribute(2, n.CHUNK_IS_RELEVANT)] is True


@pytest.mark.parametrize(
    ("interaction", "result", "duration"),
    [
        (None, None, 0.1),
        ("not an interaction", object(), "slow"),
        (Interaction(query=None, answer=None, documents=[], trace_id=0), object(), float("nan")),
    ],
)
def test_emit_never_raises(
    telemetry: Telemetry, interaction: object, result: object, duration: object
) -> None:
    emitter = telemetry.emitter()
    emitter.emit(interaction, result, duration)  # type: ignore[arg-type]
    assert sum(emitter.failures.values()) >= 1


def test_invalid_duration_skips_only_the_duration_histogram(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(
        make_interaction(parent=telemetry.evaluated_span()), evaluate(GREEN_TEA, GREEN_TEA_MARKS), -1.0
    )
    assert telemetry.points(n.METRIC_EVALUATION_DURATION) == []
    assert telemetry.points(n.METRIC_EVALUATION_SCORE)[0].count == 1
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert span.start_time == span.end_time


def test_emit_with_no_sdk_configured_is_silent() -> None:
    """API-only (no providers given, none set globally in this process): everything is a no-op."""
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    interaction = Interaction(query="q", answer="a", documents=["c"], trace_id=1)
    emitter = Emitter()
    emitter.emit(interaction, result, 0.1)
    emitter.observe(lambda: {("evaluated", None): 1}, lambda: 0)
    assert emitter.failures == {}


def test_force_flush_exports_what_batch_processors_hold() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=60_000))
    emitter = Emitter(tracer_provider=provider)
    interaction = Interaction(query="q", answer="a", documents=["c"], trace_id=1)
    emitter.emit(interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    assert exporter.get_finished_spans() == ()
    assert emitter.force_flush(5000) is True
    assert sorted(s.name for s in exporter.get_finished_spans()) == [n.SPAN_EVALUATION, n.SPAN_INTERACTION]
    provider.shutdown()
