"""Issue 9 item 7: the judge's cost stays the judge's.

Tools that add up ``gen_ai.usage.*`` (and group by ``gen_ai.request.model``) over a trace must not count the
judge's tokens as the application's: the evaluation span lives inside the application's trace, so the judge's
model and tokens go under the project's own names (``ctxutil.judge.*``), on the span and on the
``gen_ai.evaluation.result`` event alike.
"""

from __future__ import annotations

from ctxutil_otel.emit import names as n
from ctxutil_otel.judges import TokenUsage

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, evaluate_failing, make_interaction


def _gen_ai_cost_keys(attributes: dict[str, object]) -> list[str]:
    return sorted(k for k in attributes if k.startswith("gen_ai.usage.") or k.startswith("gen_ai.request."))


def test_judge_model_and_tokens_are_not_gen_ai_usage_in_the_application_trace(telemetry: Telemetry) -> None:
    usage = TokenUsage(input_tokens=120, output_tokens=30)
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS, usage=usage, model="gpt-judge-mini")
    evaluated = telemetry.evaluated_span()
    telemetry.emitter().emit(make_interaction(GREEN_TEA, evaluated), result, 0.2)

    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert span.context.trace_id == evaluated.trace_id  # inside the application's trace
    span_attrs = dict(span.attributes or {})
    (record,) = telemetry.logs()
    log_attrs = dict(record.log_record.attributes or {})
    for attrs in (span_attrs, log_attrs):
        assert _gen_ai_cost_keys(attrs) == []
        assert attrs[n.ATTR_JUDGE_MODEL] == "gpt-judge-mini"
        assert attrs[n.ATTR_JUDGE_INPUT_TOKENS] == 120
        assert attrs[n.ATTR_JUDGE_OUTPUT_TOKENS] == 30
        assert attrs[n.ATTR_JUDGE_NAME] == "fixed"


def test_failed_evaluation_names_the_judge_model_under_the_project_name(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(
        make_interaction(GREEN_TEA, telemetry.evaluated_span()), evaluate_failing(GREEN_TEA), 5.0
    )
    attrs = dict(telemetry.spans(n.SPAN_EVALUATION)[0].attributes or {})
    assert _gen_ai_cost_keys(attrs) == []
    assert attrs[n.ATTR_JUDGE_MODEL] == "judge-model-x"


def test_judge_names_live_in_the_project_namespace() -> None:
    judge_names = (
        n.ATTR_JUDGE_NAME,
        n.ATTR_JUDGE_MODEL,
        n.ATTR_JUDGE_INPUT_TOKENS,
        n.ATTR_JUDGE_OUTPUT_TOKENS,
    )
    for name in judge_names:
        assert name.startswith("ctxutil.judge."), name
