"""Metrics: explicit buckets, chunk counters, duration, judge tokens, observables, bounded attributes."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint, NumberDataPoint

from ctxutil_otel.capture import Interaction
from ctxutil_otel.emit import names as n
from ctxutil_otel.judges import TokenUsage

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, evaluate_failing, make_interaction

BOUNDED = {n.ATTR_EVALUATION_NAME, n.ATTR_EVALUATION_SCORE_LABEL, n.ATTR_APPLICATION_NAME}


def _interaction(t: Telemetry) -> Interaction:
    return make_interaction(parent=t.evaluated_span(), trace_id=99, id="run-secret-id-42")


def _by_label(points: list[NumberDataPoint]) -> dict[str, float]:
    return {str((p.attributes or {})[n.ATTR_EVALUATION_SCORE_LABEL]): p.value for p in points}


def test_score_histogram_uses_exactly_the_explicit_buckets(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter()
    emitter.emit(_interaction(telemetry), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.2)  # 0.667 pass
    emitter.emit(_interaction(telemetry), evaluate(GREEN_TEA, ["RU", "R", "R", ""]), 0.2)  # 0.333 fail
    emitter.emit(_interaction(telemetry), evaluate(GREEN_TEA, ["RU", "RU", "RU", ""]), 0.2)  # 1.0 pass

    metric = telemetry.metrics()[n.METRIC_EVALUATION_SCORE]
    assert metric.unit == "1"
    points: list[HistogramDataPoint] = list(metric.data.data_points)  # type: ignore[arg-type]
    assert {tuple(p.explicit_bounds) for p in points} == {n.SCORE_BUCKETS}
    # the utilization points (the relevancy ones share the histogram: tests/emit/test_dimensions.py)
    points = [p for p in points if (p.attributes or {})[n.ATTR_EVALUATION_NAME] == "contextual_utilization"]
    assert n.SCORE_BUCKETS == (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    by_label = {str((p.attributes or {})[n.ATTR_EVALUATION_SCORE_LABEL]): p for p in points}
    passed, failed = by_label["pass"], by_label["fail"]
    assert passed.count == 2 and passed.sum == pytest.approx(2 / 3 + 1.0)
    assert failed.count == 1 and failed.sum == pytest.approx(1 / 3)
    # bucket i counts values in (bounds[i-1], bounds[i]]: 0.667 -> (0.6, 0.7] = index 7; 1.0 -> index 10
    assert passed.bucket_counts[7] == 1 and passed.bucket_counts[10] == 1
    assert failed.bucket_counts[4] == 1
    assert sum(passed.bucket_counts) == 2


def test_duration_histogram_is_in_seconds_with_explicit_buckets(telemetry: Telemetry) -> None:
    telemetry.emitter().emit(_interaction(telemetry), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.25)
    metric = telemetry.metrics()[n.METRIC_EVALUATION_DURATION]
    assert metric.unit == "s"
    (point,) = metric.data.data_points
    assert isinstance(point, HistogramDataPoint)
    assert tuple(point.explicit_bounds) == n.DURATION_BUCKETS
    assert point.sum == pytest.approx(0.25)
    assert point.count == 1


def test_chunk_counters_add_the_relevant_and_utilized_counts(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter()
    emitter.emit(_interaction(telemetry), evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)  # 3 relevant, 2 used
    emitter.emit(_interaction(telemetry), evaluate(GREEN_TEA, ["RU", "RU", "RU", "RU"]), 0.1)  # 4, 4
    emitter.emit(_interaction(telemetry), evaluate(GREEN_TEA, ["R", "R", "", ""]), 0.1)  # 2, 0 (fail)
    emitter.emit(_interaction(telemetry), evaluate_failing(GREEN_TEA), 0.1)  # error: not counted

    relevant = _by_label(telemetry.points(n.METRIC_CHUNKS_RELEVANT))
    utilized = _by_label(telemetry.points(n.METRIC_CHUNKS_UTILIZED))
    assert relevant == {"pass": 7, "fail": 2}
    assert utilized == {"pass": 6, "fail": 0}
    assert telemetry.metrics()[n.METRIC_CHUNKS_RELEVANT].unit == "{chunk}"


def test_not_applicable_and_error_results_record_no_score(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter()
    emitter.emit(_interaction(telemetry), evaluate(GREEN_TEA, ["", "", "", ""]), 0.1)
    emitter.emit(_interaction(telemetry), evaluate_failing(GREEN_TEA), 0.1)
    assert telemetry.points(n.METRIC_EVALUATION_SCORE) == []
    durations = telemetry.points(n.METRIC_EVALUATION_DURATION)
    labels = sorted(str((p.attributes or {})[n.ATTR_EVALUATION_SCORE_LABEL]) for p in durations)
    assert labels == ["error", "not_applicable"]
    assert _by_label(telemetry.points(n.METRIC_CHUNKS_RELEVANT)) == {"not_applicable": 0}


def test_judge_tokens_are_counted_by_token_type(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter()
    for _ in range(2):
        result = evaluate(GREEN_TEA, GREEN_TEA_MARKS, usage=TokenUsage(input_tokens=100, output_tokens=7))
        emitter.emit(_interaction(telemetry), result, 0.1)
    points = telemetry.points(n.METRIC_JUDGE_TOKENS)
    by_type = {str((p.attributes or {})[n.ATTR_TOKEN_TYPE]): p.value for p in points}
    assert by_type == {"input": 200, "output": 14}
    assert {frozenset((p.attributes or {}).keys()) for p in points} == {
        frozenset({n.ATTR_EVALUATION_NAME, n.ATTR_TOKEN_TYPE})
    }


def test_metric_attributes_are_only_the_bounded_set(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter(application_name="faq-bot")
    emitter.emit(
        _interaction(telemetry), evaluate(GREEN_TEA, GREEN_TEA_MARKS, usage=TokenUsage(input_tokens=3)), 0.1
    )
    emitter.emit(_interaction(telemetry), evaluate_failing(GREEN_TEA), 0.1)
    emitter.observe(lambda: {("evaluated", None): 1, ("failed", "timeout"): 1}, lambda: 0)
    metrics = telemetry.metrics()
    for name in (
        n.METRIC_EVALUATION_SCORE,
        n.METRIC_CHUNKS_RELEVANT,
        n.METRIC_CHUNKS_UTILIZED,
        n.METRIC_EVALUATION_DURATION,
    ):
        for point in metrics[name].data.data_points:
            attributes = point.attributes or {}
            if attributes[n.ATTR_EVALUATION_NAME] == "contextual_relevancy":  # no score label: no threshold
                assert set(attributes) == BOUNDED - {n.ATTR_EVALUATION_SCORE_LABEL}, name
                continue
            assert set(attributes.keys()) == BOUNDED, name
            assert (point.attributes or {})[n.ATTR_APPLICATION_NAME] == "faq-bot"
    for point in metrics[n.METRIC_JUDGE_TOKENS].data.data_points:
        assert set((point.attributes or {}).keys()) == {
            n.ATTR_EVALUATION_NAME,
            n.ATTR_TOKEN_TYPE,
            n.ATTR_APPLICATION_NAME,
        }
    for point in metrics[n.METRIC_QUEUE_SIZE].data.data_points:
        assert set((point.attributes or {}).keys()) == {n.ATTR_APPLICATION_NAME}
    everything = repr([p.attributes for m in metrics.values() for p in m.data.data_points])
    for private in ("run-secret-id-42", GREEN_TEA.query, "item-green-tea"):
        assert private not in everything


def test_observable_counter_reports_what_the_callback_returns(telemetry: Telemetry) -> None:
    counts = {
        ("sampled_out", None): 90,
        ("evaluated", None): 6,
        ("not_applicable", None): 1,
        ("failed", "timeout"): 2,
        ("failed", None): 1,
        ("dropped", "queue_full"): 3,
        ("dropped", "rate_limited"): 4,
    }
    queue = [5]
    emitter = telemetry.emitter()
    emitter.observe(lambda: counts, lambda: queue[0])

    def read() -> dict[frozenset[tuple[str, object]], float]:
        return {
            frozenset((p.attributes or {}).items()): p.value for p in telemetry.points(n.METRIC_EVALUATIONS)
        }

    assert read() == {
        frozenset({(n.ATTR_OUTCOME, "sampled_out")}): 90,
        frozenset({(n.ATTR_OUTCOME, "evaluated")}): 6,
        frozenset({(n.ATTR_OUTCOME, "not_applicable")}): 1,
        frozenset({(n.ATTR_OUTCOME, "failed"), (n.ATTR_ERROR_TYPE, "timeout")}): 2,
        frozenset({(n.ATTR_OUTCOME, "failed"), (n.ATTR_ERROR_TYPE, "_OTHER")}): 1,
        frozenset({(n.ATTR_OUTCOME, "dropped"), (n.ATTR_REASON, "queue_full")}): 3,
        frozenset({(n.ATTR_OUTCOME, "dropped"), (n.ATTR_REASON, "rate_limited")}): 4,
    }
    (gauge,) = telemetry.points(n.METRIC_QUEUE_SIZE)
    assert gauge.value == 5

    # Read again at the next collection: the callbacks are live views of the evaluator's counters.
    counts[("evaluated", None)] = 10
    queue[0] = 0
    assert read()[frozenset({(n.ATTR_OUTCOME, "evaluated")})] == 10
    (gauge,) = telemetry.points(n.METRIC_QUEUE_SIZE)
    assert gauge.value == 0


def test_observe_twice_replaces_the_sources_without_double_counting(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter()
    emitter.observe(lambda: {("evaluated", None): 1}, lambda: 1)
    emitter.observe(lambda: {("evaluated", None): 7}, lambda: 2)
    (point,) = telemetry.points(n.METRIC_EVALUATIONS)
    assert point.value == 7
    (gauge,) = telemetry.points(n.METRIC_QUEUE_SIZE)
    assert gauge.value == 2


def test_a_failing_observe_callback_reports_nothing_and_is_counted(telemetry: Telemetry) -> None:
    def broken() -> dict[tuple[str, str | None], int]:
        raise RuntimeError("evaluator gone")

    emitter = telemetry.emitter()
    emitter.observe(broken, lambda: 3)
    assert telemetry.points(n.METRIC_EVALUATIONS) == []
    (gauge,) = telemetry.points(n.METRIC_QUEUE_SIZE)
    assert gauge.value == 3
    assert emitter.failures[n.METRIC_EVALUATIONS] >= 1
