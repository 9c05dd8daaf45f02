"""The demo's compact console lines name the evaluation: a ``contextual_relevancy`` event must not read
like an unlabelled utilization event."""

from __future__ import annotations

from ctxutil_otel.emit._console import format_log_record

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, make_interaction


def test_event_lines_show_the_evaluation_name(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(make_interaction(GREEN_TEA), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    lines = sorted(format_log_record(record) for record in telemetry.logs(evaluation=None))
    assert len(lines) == 2
    assert "evaluation=contextual_relevancy" in lines[0]
    assert "evaluation=contextual_utilization" in lines[1]
    assert "label=" in lines[1] and "label=" not in lines[0]  # relevancy has no score label
