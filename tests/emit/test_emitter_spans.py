"""The evaluation span: parenting, link, root span, attributes and their types, content capture, errors."""

from __future__ import annotations

import time

import pytest
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from ctxutil_otel.capture import Interaction
from ctxutil_otel.emit import Emitter
from ctxutil_otel.emit import names as n
from ctxutil_otel.judges import TokenUsage

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, evaluate_failing, make_interaction


def test_span_is_child_of_and_linked_to_the_evaluated_span(telemetry: Telemetry) -> None:
    evaluated = telemetry.evaluated_span()
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    telemetry.emitter().emit(make_interaction(GREEN_TEA, evaluated), result, 0.25)

    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert span.kind is SpanKind.INTERNAL
    assert span.parent is not None
    assert span.parent.span_id == evaluated.span_id
    assert span.context.trace_id == evaluated.trace_id
    assert [link.context.span_id for link in span.links] == [evaluated.span_id]
    assert span.links[0].context.trace_id == evaluated.trace_id
    assert not telemetry.spans(n.SPAN_INTERACTION), "no root span when a parent exists"
    assert span.end_time is not None and span.start_time is not None
    assert span.end_time - span.start_time == pytest.approx(0.25e9, abs=1e6)
    assert span.status.status_code is StatusCode.UNSET


def test_root_span_is_created_when_there_is_no_parent(telemetry: Telemetry) -> None:
    start = time.time_ns() - 3_000_000_000
    end = start + 1_500_000_000
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    interaction = make_interaction(GREEN_TEA, None, start_time_ns=start, end_time_ns=end)
    telemetry.emitter().emit(interaction, result, 0.1)

    (root,) = telemetry.spans(n.SPAN_INTERACTION)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert root.parent is None
    assert (root.start_time, root.end_time) == (start, end)
    assert root.attributes is not None and root.attributes[n.ATTR_INTERACTION_ID] == "run-1"
    assert span.parent is not None and span.parent.span_id == root.context.span_id
    assert span.context.trace_id == root.context.trace_id
    assert [link.context.span_id for link in span.links] == [root.context.span_id]


def test_root_span_ignores_the_ambient_current_span(telemetry: Telemetry) -> None:
    """The worker may run inside some other span; the interaction's root must still be a root."""
    tracer = telemetry.tracer_provider.get_tracer("tests.worker")
    with tracer.start_as_current_span("worker-loop"):
        telemetry.emitter().emit(make_interaction(GREEN_TEA), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    (root,) = telemetry.spans(n.SPAN_INTERACTION)
    assert root.parent is None


def test_every_attribute_present_with_the_right_type(telemetry: Telemetry) -> None:
    usage = TokenUsage(input_tokens=120, output_tokens=30)
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS, usage=usage, model="gpt-judge-mini")
    telemetry.emitter(application_name="faq-bot").emit(
        make_interaction(GREEN_TEA, telemetry.evaluated_span()), result, 0.2
    )
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    attrs = dict(span.attributes or {})

    expected = {
        n.ATTR_EVALUATION_NAME: "contextual_utilization",
        n.ATTR_EVALUATION_SCORE_LABEL: "pass",
        n.ATTR_TOTAL_RELEVANT_CHUNKS: 3,
        n.ATTR_UTILIZED_CHUNKS: 2,
        n.ATTR_UTILIZATION_RATE: "66.7%",
        n.ATTR_TOTAL_CHUNKS: 4,
        n.ATTR_JUDGE_NAME: "fixed",
        n.ATTR_JUDGE_MODEL: "gpt-judge-mini",
        n.ATTR_JUDGE_INPUT_TOKENS: 120,
        n.ATTR_JUDGE_OUTPUT_TOKENS: 30,
        n.ATTR_APPLICATION_NAME: "faq-bot",
        n.ATTR_INTERACTION_ID: "run-1",
        n.ATTR_INTERACTION_SOURCE: "langchain",
        n.ATTR_CHUNKS_TRUNCATED: False,
    }
    for key, value in expected.items():
        assert attrs[key] == value, key
        assert type(attrs[key]) is type(value), key
    for key in (n.ATTR_EVALUATION_SCORE_VALUE, n.ATTR_UTILIZATION_SCORE, n.ATTR_THRESHOLD):
        assert type(attrs[key]) is float, key
    assert attrs[n.ATTR_EVALUATION_SCORE_VALUE] == pytest.approx(2 / 3)
    assert attrs[n.ATTR_UTILIZATION_SCORE] == pytest.approx(2 / 3)
    assert attrs[n.ATTR_THRESHOLD] == 0.5
    assert attrs[n.ATTR_EVALUATION_EXPLANATION] == result.explanation
    assert n.ATTR_ERROR_TYPE not in attrs

    for i, marks in enumerate(GREEN_TEA_MARKS):
        assert attrs[n.chunk_attribute(i, n.CHUNK_INDEX)] == i
        assert attrs[n.chunk_attribute(i, n.CHUNK_IS_RELEVANT)] is ("R" in marks)
        assert attrs[n.chunk_attribute(i, n.CHUNK_IS_UTILIZED)] is ("U" in marks)
    assert n.chunk_attribute(4, n.CHUNK_INDEX) not in attrs


def test_content_is_absent_by_default(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(
        make_interaction(GREEN_TEA, telemetry.evaluated_span()), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1
    )
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    attrs = dict(span.attributes or {})
    assert not [k for k in attrs if k.endswith((".text", ".reason"))]
    assert n.ATTR_QUERY not in attrs and n.ATTR_ANSWER not in attrs
    rendered = repr(attrs)
    for text in [GREEN_TEA.query, GREEN_TEA.actual_output, *GREEN_TEA.retrieved_content]:
        assert text not in rendered


def test_content_capture_adds_truncated_text_query_answer_and_reasons(telemetry: Telemetry) -> None:
    limit = 18
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    telemetry.emitter(capture_content=True, max_content_chars=limit).emit(
        make_interaction(GREEN_TEA, telemetry.evaluated_span()), result, 0.1
    )
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    attrs = dict(span.attributes or {})
    for i, chunk in enumerate(GREEN_TEA.retrieved_content):
        text = attrs[n.chunk_attribute(i, n.CHUNK_TEXT)]
        assert isinstance(text, str) and len(text) == limit
        assert text == chunk[: limit - 1] + "…"
        reason = result.signals.verdicts[i].reason
        assert len(reason) > limit
        assert attrs[n.chunk_attribute(i, n.CHUNK_REASON)] == reason[: limit - 1] + "…"
    assert attrs[n.ATTR_QUERY] == GREEN_TEA.query[: limit - 1] + "…"
    assert attrs[n.ATTR_ANSWER] == GREEN_TEA.actual_output[: limit - 1] + "…"


def test_content_comes_from_the_item_when_given(telemetry: Telemetry) -> None:
    """The worker may pass the validated DatasetItem; documents of the interaction are then not read."""
    interaction = Interaction(
        query=None, answer=None, documents=[], trace_id=1, parent=telemetry.evaluated_span()
    )
    telemetry.emitter(capture_content=True).emit(
        interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1, item=GREEN_TEA
    )
    attrs = dict(telemetry.spans(n.SPAN_EVALUATION)[0].attributes or {})
    assert attrs[n.chunk_attribute(3, n.CHUNK_TEXT)] == GREEN_TEA.retrieved_content[3]
    assert attrs[n.ATTR_QUERY] == GREEN_TEA.query


def test_documents_are_read_through_chunk_text(telemetry: Telemetry) -> None:
    """LangChain-style documents on the interaction (mappings here) give the chunk text."""
    docs = [{"page_content": c} for c in GREEN_TEA.retrieved_content]
    interaction = make_interaction(parent=telemetry.evaluated_span(), documents=docs, trace_id=1, id=None)
    telemetry.emitter(capture_content=True).emit(interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    attrs = dict(telemetry.spans(n.SPAN_EVALUATION)[0].attributes or {})
    assert attrs[n.chunk_attribute(1, n.CHUNK_TEXT)] == GREEN_TEA.retrieved_content[1]


def test_error_result_has_error_type_error_status_and_no_score(telemetry: Telemetry) -> None:
    result = evaluate_failing(GREEN_TEA)
    assert result.label == "error"
    telemetry.emitter().emit(make_interaction(GREEN_TEA, telemetry.evaluated_span()), result, 5.0)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    attrs = dict(span.attributes or {})
    assert attrs[n.ATTR_ERROR_TYPE] == "timeout"
    assert attrs[n.ATTR_EVALUATION_SCORE_LABEL] == "error"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "timeout"
    assert n.ATTR_EVALUATION_SCORE_VALUE not in attrs
    assert n.ATTR_UTILIZATION_SCORE not in attrs
    assert attrs[n.ATTR_JUDGE_MODEL] == "judge-model-x"


def test_not_applicable_has_a_label_but_no_score_value(telemetry: Telemetry) -> None:
    item = GREEN_TEA.model_copy(update={"retrieved_content": ["Tea originated in China."]})
    result = evaluate(item, [""])
    assert result.label == "not_applicable"
    telemetry.emitter().emit(make_interaction(item, telemetry.evaluated_span()), result, 0.01)
    attrs = dict(telemetry.spans(n.SPAN_EVALUATION)[0].attributes or {})
    assert attrs[n.ATTR_EVALUATION_SCORE_LABEL] == "not_applicable"
    assert n.ATTR_EVALUATION_SCORE_VALUE not in attrs
    assert n.ATTR_UTILIZATION_SCORE not in attrs
    assert attrs[n.ATTR_UTILIZATION_RATE] == "n/a"
    assert attrs[n.ATTR_TOTAL_RELEVANT_CHUNKS] == 0
    assert n.ATTR_ERROR_TYPE not in attrs


def test_chunk_attributes_stay_within_the_span_attribute_limit() -> None:
    """The SDK evicts the *oldest* attributes past its count limit: the emitter must never get there,
    so the gen_ai.evaluation.* attributes survive and the truncation is flagged."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=40), shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    chunks = [f"chunk number {i} about green tea" for i in range(30)]
    item = GREEN_TEA.model_copy(update={"retrieved_content": chunks})
    result = evaluate(item, ["RU"] * 30)
    Emitter(tracer_provider=provider).emit(make_interaction(item, None), result, 0.1)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == n.SPAN_EVALUATION]
    attrs = dict(span.attributes or {})
    assert len(attrs) <= 40
    assert span.dropped_attributes == 0
    assert attrs[n.ATTR_EVALUATION_NAME] == "contextual_utilization"
    assert attrs[n.ATTR_CHUNKS_TRUNCATED] is True
    shown = [k for k in attrs if k.endswith(".index") and k != n.ATTR_NOT_RELEVANT_INDEX]
    assert 0 < len(shown) < 30
    assert attrs[n.chunk_attribute(0, n.CHUNK_INDEX)] == 0
    provider.shutdown()


def test_max_chunk_attributes_bounds_the_chunks(telemetry: Telemetry) -> None:
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    telemetry.emitter(max_chunk_attributes=2).emit(
        make_interaction(GREEN_TEA, telemetry.evaluated_span()), result, 0
    )
    attrs = dict(telemetry.spans(n.SPAN_EVALUATION)[0].attributes or {})
    assert sorted(k for k in attrs if k.endswith(".index") and k != n.ATTR_NOT_RELEVANT_INDEX) == [
        n.chunk_attribute(0, n.CHUNK_INDEX),
        n.chunk_attribute(1, n.CHUNK_INDEX),
    ]
    assert attrs[n.ATTR_CHUNKS_TRUNCATED] is True


def test_secret_lookalikes_are_redacted_from_the_explanation(telemetry: Telemetry) -> None:
    result = evaluate_failing(GREEN_TEA).model_copy(
        update={"explanation": "Judge failed: Incorrect API key provided: sk-proj-abcdefghijklmnop1234"}
    )
    telemetry.emitter().emit(make_interaction(GREEN_TEA, telemetry.evaluated_span()), result, 0.1)
    attrs = dict(telemetry.spans(n.SPAN_EVALUATION)[0].attributes or {})
    explanation = attrs[n.ATTR_EVALUATION_EXPLANATION]
    assert isinstance(explanation, str)
    assert "sk-proj" not in explanation and "[REDACTED]" in explanation


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"max_content_chars": 0}, "max_content_chars"),
        ({"max_chunk_attributes": -1}, "max_chunk_attributes"),
        ({"application_name": 42}, "application_name"),
    ],
)
def test_bad_arguments_name_the_field(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Emitter(**kwargs)  # type: ignore[arg-type]
