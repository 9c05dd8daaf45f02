"""The evaluated service on results (issue 9 item 6, unit level): from ``Interaction.service`` (the evaluated
spans' Resource) onto the span, the event and every per-result metric point, bounded in cardinality. The
end-to-end proof through ``serve`` and the real Prometheus is tests/deploy/test_serve_senders.py."""

from __future__ import annotations

import dataclasses

from ctxutil_otel.emit import names as n

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, make_interaction

SENDER = {"service.name": "app-a", "service.namespace": "shop", "deployment.environment": "prod"}
LABELS = {
    n.ATTR_EVALUATED_SERVICE_NAME: "app-a",
    n.ATTR_EVALUATED_SERVICE_NAMESPACE: "shop",
    n.ATTR_EVALUATED_DEPLOYMENT_ENVIRONMENT: "prod",
}


def test_span_event_and_metric_points_name_the_evaluated_service(telemetry: Telemetry) -> None:
    interaction = dataclasses.replace(make_interaction(GREEN_TEA, telemetry.evaluated_span()), service=SENDER)
    telemetry.emitter().emit(interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    (record,) = telemetry.logs()
    for attrs in (dict(span.attributes or {}), dict(record.log_record.attributes or {})):
        assert {k: attrs[k] for k in LABELS} == LABELS
    for metric in (n.METRIC_EVALUATION_SCORE, n.METRIC_CHUNKS_RELEVANT, n.METRIC_EVALUATION_DURATION):
        (point,) = telemetry.points(metric)
        assert {k: point.attributes[k] for k in LABELS} == LABELS, metric


def test_unknown_sender_adds_nothing(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(
        make_interaction(GREEN_TEA, telemetry.evaluated_span()), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1
    )
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert not [k for k in (span.attributes or {}) if k.startswith("ctxutil.evaluated.")]


def test_distinct_senders_are_bounded(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter()
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    for i in range(n.MAX_EVALUATED_SERVICES + 5):
        interaction = dataclasses.replace(
            make_interaction(GREEN_TEA, None), service={"service.name": f"app-{i}"}
        )
        emitter.emit(interaction, result, 0.1)
    names = {p.attributes[n.ATTR_EVALUATED_SERVICE_NAME] for p in telemetry.points(n.METRIC_CHUNKS_RELEVANT)}
    assert len(names) == n.MAX_EVALUATED_SERVICES + 1
    assert n.EVALUATED_SERVICE_OTHER in names and "app-0" in names
    assert emitter.dimension_overflows == {n.ATTR_EVALUATED_SERVICE_NAME: 5}
    assert n.ATTR_EVALUATED_SERVICE_NAME not in emitter.failures  # a bound, not a failure


def test_the_default_bound_is_the_dimension_setting_default() -> None:
    from ctxutil_otel import Settings

    assert Settings.model_fields["dimension_max_values"].default == n.MAX_EVALUATED_SERVICES
