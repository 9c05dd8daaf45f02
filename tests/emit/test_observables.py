"""``ctxutil.worker.cpu_throttled``: the third observable source of ``Emitter.observe`` (seconds the worker
waited on its CPU budget), read through the real SDK's InMemoryMetricReader."""

from __future__ import annotations

import math

import pytest
from opentelemetry.sdk.metrics.export import Sum

from ctxutil_otel.emit import names as n

from .conftest import Telemetry


def _outcomes() -> dict[tuple[str, str | None], int]:
    return {("evaluated", None): 4}


def test_throttle_counter_reports_the_callables_seconds_as_a_monotonic_cumulative_sum(
    telemetry: Telemetry,
) -> None:
    waited = [0.25]
    emitter = telemetry.emitter(application_name="faq-bot")
    emitter.observe(_outcomes, lambda: 2, lambda: waited[0])

    metric = telemetry.metrics()[n.METRIC_WORKER_CPU_THROTTLED]
    assert metric.unit == "s"
    assert isinstance(metric.data, Sum)
    assert metric.data.is_monotonic
    (point,) = metric.data.data_points
    assert point.value == 0.25
    assert dict(point.attributes or {}) == {n.ATTR_APPLICATION_NAME: "faq-bot"}

    # A live view: the next collection reads the callable again.
    waited[0] = 3.75
    (point,) = telemetry.points(n.METRIC_WORKER_CPU_THROTTLED)
    assert point.value == 3.75


def test_without_an_application_name_the_counter_has_no_attributes(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter()
    emitter.observe(_outcomes, lambda: 0, lambda: 1.5)
    (point,) = telemetry.points(n.METRIC_WORKER_CPU_THROTTLED)
    assert point.value == 1.5
    assert not point.attributes


def test_without_the_third_source_nothing_is_reported_and_the_others_still_are(telemetry: Telemetry) -> None:
    """Callers of the two-source form (before the CPU budget existed) keep working."""
    emitter = telemetry.emitter()
    emitter.observe(_outcomes, lambda: 6)
    assert telemetry.points(n.METRIC_WORKER_CPU_THROTTLED) == []
    (outcome,) = telemetry.points(n.METRIC_EVALUATIONS)
    assert outcome.value == 4
    (gauge,) = telemetry.points(n.METRIC_QUEUE_SIZE)
    assert gauge.value == 6
    assert emitter.failures == {}


def test_observe_again_adds_or_replaces_the_throttle_source(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter()
    emitter.observe(_outcomes, lambda: 0)
    emitter.observe(_outcomes, lambda: 0, lambda: 2.0)
    (point,) = telemetry.points(n.METRIC_WORKER_CPU_THROTTLED)
    assert point.value == 2.0
    emitter.observe(_outcomes, lambda: 0, lambda: 5.0)
    (point,) = telemetry.points(n.METRIC_WORKER_CPU_THROTTLED)
    assert point.value == 5.0  # replaced, not added to the first source


def test_a_raising_source_is_counted_and_the_other_observables_still_report(telemetry: Telemetry) -> None:
    calls = []

    def broken() -> float:
        calls.append(1)
        raise RuntimeError("engine gone")

    emitter = telemetry.emitter()
    emitter.observe(_outcomes, lambda: 7, broken)
    metrics = telemetry.metrics()
    assert calls, "the source was never read"
    assert n.METRIC_WORKER_CPU_THROTTLED not in metrics or not list(
        metrics[n.METRIC_WORKER_CPU_THROTTLED].data.data_points
    )
    (outcome,) = metrics[n.METRIC_EVALUATIONS].data.data_points
    assert outcome.value == 4
    (gauge,) = metrics[n.METRIC_QUEUE_SIZE].data.data_points
    assert gauge.value == 7
    assert emitter.failures == {n.METRIC_WORKER_CPU_THROTTLED: 1}
    telemetry.metrics()
    assert emitter.failures == {n.METRIC_WORKER_CPU_THROTTLED: 2}  # counted at every collection


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "3.0", True, None])
def test_an_invalid_value_is_not_reported_and_is_counted(telemetry: Telemetry, bad: object) -> None:
    emitter = telemetry.emitter()
    emitter.observe(_outcomes, lambda: 0, lambda: bad)  # type: ignore[arg-type, return-value]
    assert telemetry.points(n.METRIC_WORKER_CPU_THROTTLED) == []
    assert emitter.failures == {n.METRIC_WORKER_CPU_THROTTLED: 1}


def test_an_int_of_seconds_is_accepted(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter()
    emitter.observe(_outcomes, lambda: 0, lambda: 0)
    (point,) = telemetry.points(n.METRIC_WORKER_CPU_THROTTLED)
    assert point.value == 0
    assert emitter.failures == {}
