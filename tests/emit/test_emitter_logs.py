"""The ``gen_ai.evaluation.result`` log record: event name, trace correlation, attributes, privacy."""

from __future__ import annotations

import time

from opentelemetry._logs import SeverityNumber

from ctxutil_otel.emit import names as n

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, evaluate_failing, make_interaction


def test_log_record_carries_the_evaluated_span_ids_and_the_attributes(telemetry: Telemetry) -> None:
    evaluated = telemetry.evaluated_span()
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    before = time.time_ns()
    telemetry.emitter().emit(make_interaction(parent=evaluated), result, 0.3)

    (readable,) = telemetry.logs()
    record = readable.log_record
    assert record.event_name == n.EVENT_EVALUATION_RESULT
    assert record.trace_id == evaluated.trace_id
    assert record.span_id == evaluated.span_id
    assert record.severity_number is SeverityNumber.INFO
    assert record.timestamp is not None and record.timestamp >= before
    attrs = dict(record.attributes or {})
    assert attrs[n.ATTR_EVALUATION_NAME] == "contextual_utilization"
    assert attrs[n.ATTR_EVALUATION_SCORE_VALUE] == result.score
    assert attrs[n.ATTR_EVALUATION_SCORE_LABEL] == "pass"
    assert attrs[n.ATTR_EVALUATION_EXPLANATION] == result.explanation
    assert attrs[n.ATTR_INTERACTION_ID] == "run-1"
    assert n.ATTR_ERROR_TYPE not in attrs
    # The log record is not the span: no per-chunk attributes on it, only which chunks were not counted.
    assert not [
        k for k in attrs if k.startswith(n.ATTR_CHUNK_PREFIX + ".") and k != n.ATTR_NOT_RELEVANT_INDEX
    ]
    assert attrs[n.ATTR_NOT_RELEVANT_INDEX] == (3,)
    assert readable.instrumentation_scope is not None
    assert readable.instrumentation_scope.name == n.INSTRUMENTATION_SCOPE


def test_log_record_without_parent_points_at_the_new_root_span(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(make_interaction(parent=None), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    (root,) = telemetry.spans(n.SPAN_INTERACTION)
    (readable,) = telemetry.logs()
    assert readable.log_record.trace_id == root.context.trace_id
    assert readable.log_record.span_id == root.context.span_id


def test_error_log_record_has_error_type_and_no_score(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(
        make_interaction(parent=telemetry.evaluated_span()), evaluate_failing(GREEN_TEA), 5.0
    )
    (readable,) = telemetry.logs()
    attrs = dict(readable.log_record.attributes or {})
    assert attrs[n.ATTR_ERROR_TYPE] == "timeout"
    assert attrs[n.ATTR_EVALUATION_SCORE_LABEL] == "error"
    assert n.ATTR_EVALUATION_SCORE_VALUE not in attrs
    assert readable.log_record.severity_number is SeverityNumber.WARN


def test_log_record_has_no_text_unless_content_capture(telemetry: Telemetry) -> None:
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    telemetry.emitter().emit(make_interaction(parent=telemetry.evaluated_span()), result, 0.1)
    telemetry.emitter(capture_content=True).emit(
        make_interaction(parent=telemetry.evaluated_span()), result, 0.1
    )
    private, captured = (dict(r.log_record.attributes or {}) for r in telemetry.logs())
    assert n.ATTR_QUERY not in private and n.ATTR_ANSWER not in private
    assert GREEN_TEA.query not in repr(private)
    assert captured[n.ATTR_QUERY] == GREEN_TEA.query
    assert captured[n.ATTR_ANSWER] == GREEN_TEA.actual_output
