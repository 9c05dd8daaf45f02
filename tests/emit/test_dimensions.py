"""Dimensions on every evaluation output (issue 12 item 2, emission side): the interaction's dimensions are
on the evaluation span, both events and every per-result metric point, bounded per process (``_OTHER``,
counted in ``ctxutil.dimension.overflow``, warned once per dimension); and the retrieval half,
``contextual_relevancy``, as its own event and score point, with ``ctxutil.chunks.judged``."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from ctxutil_otel.emit import names as n
from ctxutil_otel.judges import TokenUsage

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, evaluate_failing, make_interaction

DIMS = {
    n.ATTR_REQUEST_MODEL: "gpt-4o-mini",
    n.ATTR_PROVIDER_NAME: "openai",
    n.ATTR_CHAIN_NAME: "rag_chain",
    n.ATTR_RETRIEVER_NAME: "VectorStoreRetriever",
    "ctxutil.metadata.prompt_version": "v2",
}
PER_RESULT_METRICS = (
    n.METRIC_EVALUATION_SCORE,
    n.METRIC_CHUNKS_RELEVANT,
    n.METRIC_CHUNKS_UTILIZED,
    n.METRIC_CHUNKS_JUDGED,
    n.METRIC_EVALUATION_DURATION,
    n.METRIC_JUDGE_TOKENS,
)


def _events(telemetry: Telemetry) -> dict[str, dict[str, object]]:
    return {
        str((r.log_record.attributes or {})[n.ATTR_EVALUATION_NAME]): dict(r.log_record.attributes or {})
        for r in telemetry.logs(evaluation=None)
    }


def test_dimensions_on_the_span_both_events_and_every_metric_point(telemetry: Telemetry) -> None:
    interaction = make_interaction(GREEN_TEA, telemetry.evaluated_span(), dimensions=DIMS)
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS, usage=TokenUsage(input_tokens=10, output_tokens=2))
    telemetry.emitter().emit(interaction, result, 0.1)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    events = _events(telemetry)
    assert set(events) == {"contextual_utilization", "contextual_relevancy"}
    for attrs in (dict(span.attributes or {}), *events.values()):
        assert {k: attrs.get(k) for k in DIMS} == DIMS
    for metric in PER_RESULT_METRICS:
        points = telemetry.points(metric, evaluation=None)
        assert points, metric
        for point in points:
            assert {k: point.attributes.get(k) for k in DIMS} == DIMS, metric


def test_values_are_cut_and_bounded_overflow_counted_and_warned_once(
    telemetry: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    emitter = telemetry.emitter(dimension_max_values=2, dimension_max_chars=8)
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    with caplog.at_level(logging.WARNING, logger="ctxutil_otel.emit"):
        for tenant in ("tenant-one-long", "tenant-two", "tenant-3", "tenant-4", "tenant-one-long"):
            dims = {"ctxutil.metadata.tenant": tenant, n.ATTR_REQUEST_MODEL: "m"}
            emitter.emit(make_interaction(GREEN_TEA, None, dimensions=dims), result, 0.1)
    tenants = [p.attributes["ctxutil.metadata.tenant"] for p in telemetry.points(n.METRIC_CHUNKS_RELEVANT)]
    assert sorted(tenants) == sorted(["tenant-o", "tenant-t", n.DIMENSION_OTHER])
    assert emitter.dimension_overflows == {"ctxutil.metadata.tenant": 2}
    overflow = {
        p.attributes[n.ATTR_DIMENSION_NAME]: p.value for p in telemetry.points(n.METRIC_DIMENSION_OVERFLOW)
    }
    assert overflow == {"ctxutil.metadata.tenant": 2, n.ATTR_REQUEST_MODEL: 0}  # each series starts at 0
    warnings = [r for r in caplog.records if "ctxutil.metadata.tenant" in r.getMessage()]
    assert len(warnings) == 1
    assert {p.attributes[n.ATTR_REQUEST_MODEL] for p in telemetry.points(n.METRIC_CHUNKS_RELEVANT)} == {"m"}


def test_the_sender_identity_shares_the_limiter(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter(dimension_max_values=1)
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    for name in ("app-a", "app-b"):
        interaction = dataclasses.replace(make_interaction(GREEN_TEA, None), service={"service.name": name})
        emitter.emit(interaction, result, 0.1)
    names = {p.attributes[n.ATTR_EVALUATED_SERVICE_NAME] for p in telemetry.points(n.METRIC_CHUNKS_RELEVANT)}
    assert names == {"app-a", n.EVALUATED_SERVICE_OTHER}
    assert emitter.dimension_overflows == {n.ATTR_EVALUATED_SERVICE_NAME: 1}


def test_no_dimensions_no_labels(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(make_interaction(GREEN_TEA, None), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    (point,) = telemetry.points(n.METRIC_CHUNKS_RELEVANT)
    assert not set(point.attributes) & {*DIMS, n.ATTR_EVALUATED_SERVICE_NAME}
    assert telemetry.points(n.METRIC_DIMENSION_OVERFLOW) == []  # no dimension seen: no series


def test_relevancy_event_and_score_point_from_the_same_verdicts(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(
        make_interaction(GREEN_TEA, telemetry.evaluated_span()), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1
    )
    relevancy = _events(telemetry)["contextual_relevancy"]
    assert relevancy[n.ATTR_EVALUATION_SCORE_VALUE] == pytest.approx(3 / 4)
    assert n.ATTR_EVALUATION_SCORE_LABEL not in relevancy
    assert relevancy[n.ATTR_TOTAL_RELEVANT_CHUNKS] == 3
    assert n.ATTR_UTILIZATION_SCORE not in relevancy and n.ATTR_JUDGE_INPUT_TOKENS not in relevancy
    by_name = {
        p.attributes[n.ATTR_EVALUATION_NAME]: p
        for p in telemetry.points(n.METRIC_EVALUATION_SCORE, evaluation=None)
    }
    assert set(by_name) == {"contextual_utilization", "contextual_relevancy"}
    assert by_name["contextual_relevancy"].sum == pytest.approx(0.75)
    assert n.ATTR_EVALUATION_SCORE_LABEL not in by_name["contextual_relevancy"].attributes
    assert by_name["contextual_utilization"].sum == pytest.approx(2 / 3)
    (judged,) = telemetry.points(n.METRIC_CHUNKS_JUDGED)
    assert judged.value == 4
    assert len(telemetry.spans(n.SPAN_EVALUATION)) == 1  # no span of its own


def test_relevancy_zero_when_nothing_relevant(telemetry: Telemetry) -> None:
    result = evaluate(GREEN_TEA, ["", "", "", ""])
    assert result.label == "not_applicable"
    telemetry.emitter().emit(make_interaction(GREEN_TEA, None), result, 0.1)
    assert _events(telemetry)["contextual_relevancy"][n.ATTR_EVALUATION_SCORE_VALUE] == 0.0
    (point,) = telemetry.points(n.METRIC_EVALUATION_SCORE, evaluation=None)  # no utilization score
    assert point.attributes[n.ATTR_EVALUATION_NAME] == "contextual_relevancy"
    (judged,) = telemetry.points(n.METRIC_CHUNKS_JUDGED)
    assert judged.value == 4


def test_no_relevancy_on_errors(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(make_interaction(GREEN_TEA, None), evaluate_failing(GREEN_TEA), 0.1)
    assert set(_events(telemetry)) == {"contextual_utilization"}
    assert telemetry.points(n.METRIC_EVALUATION_SCORE, evaluation=None) == []
    assert telemetry.points(n.METRIC_CHUNKS_JUDGED) == []


def test_bounds_are_validated_naming_the_argument(telemetry: Telemetry) -> None:
    with pytest.raises(ValueError, match="dimension_max_values"):
        telemetry.emitter(dimension_max_values=0)
    with pytest.raises(ValueError, match="dimension_max_chars"):
        telemetry.emitter(dimension_max_chars=0)


def test_none_arguments_take_the_settings(monkeypatch: pytest.MonkeyPatch, telemetry: Telemetry) -> None:
    monkeypatch.setenv("CTXUTIL_DIMENSION_MAX_VALUES", "3")
    monkeypatch.setenv("CTXUTIL_DIMENSION_MAX_CHARS", "5")
    monkeypatch.setenv("CTXUTIL_CHUNK_METADATA_KEYS", "page")
    emitter = telemetry.emitter()
    assert (emitter._limiter.max_values, emitter._limiter.max_chars) == (3, 5)
    assert emitter.chunk_metadata_keys == ("page",)


def test_dimension_settings_from_the_environment_and_errors_name_the_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ctxutil_otel import Settings
    from ctxutil_otel._settings import SettingsError

    monkeypatch.setenv("CTXUTIL_METRIC_DIMENSIONS", " prompt_version, tenant ,prompt_version")
    assert Settings().metric_dimensions == ("prompt_version", "tenant")
    monkeypatch.setenv("CTXUTIL_METRIC_DIMENSIONS", "tenant,user id")
    with pytest.raises(SettingsError, match="CTXUTIL_METRIC_DIMENSIONS") as caught:
        Settings()
    assert "'user id'" in str(caught.value)
    monkeypatch.delenv("CTXUTIL_METRIC_DIMENSIONS")
    with pytest.raises(SettingsError, match="dimension_max_values"):
        Settings(dimension_max_values=0)
    with pytest.raises(SettingsError, match="dimension_max_chars"):
        Settings(dimension_max_chars=0)
