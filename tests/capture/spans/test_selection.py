"""Selection rules on the span path (issue 12 item 1): a rule sees the span that closed the turn (its
name and attributes) and the ``service.name`` of that span's Resource; a matching rule's refusal is
counted ``not_selected``, no match falls back to ``sample_rate``.

Real parts: the real OpenTelemetry SDK (a TracerProvider with a Resource, real spans through the
processor), the real Evaluator with the lexical judge; the recorders of tests/capture/conftest.py.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from ctxutil_otel.sampling import TraceIdRatioSampler
from ctxutil_otel.worker import EvaluatorStats

from .conftest import FixedTraceIds, Harness
from .test_processor import chat_attrs, retrieval_attrs

Make = Callable[..., Harness]
_RANDOM = random.Random(12)
TRACE_IDS = [_RANDOM.getrandbits(128) | 1 for _ in range(24)]


def with_service(name: str) -> Callable[[FixedTraceIds], TracerProvider]:
    def factory(ids: FixedTraceIds) -> TracerProvider:
        return TracerProvider(id_generator=ids, resource=Resource.create({"service.name": name}))

    return factory


def turn(h: Harness, root: str = "root", attributes: Mapping[str, Any] | None = None) -> None:
    """One RAG turn closed by its root span ``root`` (with ``attributes``)."""
    with h.tracer.start_as_current_span(root, attributes=attributes):
        with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs("q", "c")):
            pass
        with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
            pass


def judged(stats: EvaluatorStats) -> int:
    return stats.evaluated + stats.not_applicable


def assert_accounted(stats: EvaluatorStats) -> None:
    assert stats.captured == stats.finished, stats
    assert stats.captured == (
        stats.sampled_out + stats.not_selected + stats.dropped_total + judged(stats) + stats.failed_total
    )


@pytest.mark.parametrize("rate", [0.0, 1.0])
def test_service_name_of_the_resource(make_harness: Make, rate: float) -> None:
    rules = [{"service_name": "checkout*", "sample_rate": rate}]
    fallback = 1.0 - rate
    matching = make_harness(
        sample_rate=fallback, selection_rules=rules, provider_factory=with_service("checkout-api")
    )
    other = make_harness(sample_rate=fallback, selection_rules=rules, provider_factory=with_service("search"))
    turn(matching)
    turn(other)
    m, o = matching.flush(), other.flush()
    if rate:  # the rule lets through what the fallback rate 0 would not (the pre-filter uses the max)
        assert judged(m) == 1 and m.captured == 1, m
        # Under the rule's bound the trace is read, so its turn is counted: no rule matches, the
        # fallback rate 0 refuses it (sampled_out).
        assert o.sampled_out == 1 and judged(o) == 0, o
    else:  # the rule refuses what the fallback rate 1 takes
        assert m.not_selected == 1 and judged(m) == 0, m
        assert judged(o) == 1 and o.not_selected == 0, o
    assert_accounted(m)
    assert_accounted(o)


@pytest.mark.parametrize(
    ("rule", "closing"),
    [
        ({"root_name": "rag-*"}, {"root": "rag-answer"}),
        (
            {"attributes": {"app.tenant": "a", "app.tier": 2}},
            {"attributes": {"app.tenant": "a", "app.tier": 2}},
        ),
    ],
    ids=["enclosing_span_name", "attributes"],
)
def test_enclosing_span_conditions(make_harness: Make, rule: dict[str, Any], closing: dict[str, Any]) -> None:
    h = make_harness(sample_rate=1.0, selection_rules=[{**rule, "sample_rate": 0.0}])
    turn(h, **closing)
    turn(h, root="other", attributes={"app.tenant": "b", "app.tier": 2})
    stats = h.flush()
    assert stats.not_selected == 1 and judged(stats) == 1, stats
    assert len(h.interactions) == 1
    assert_accounted(stats)


def test_a_rule_sees_the_span_that_closed_the_turn_not_the_marked_spans(make_harness: Make) -> None:
    # The retrieval span is named "retrieval kb": a rule on that name never matches a turn.
    h = make_harness(sample_rate=1.0, selection_rules=[{"root_name": "retrieval*", "sample_rate": 0.0}])
    turn(h)
    stats = h.flush()
    assert judged(stats) == 1 and stats.not_selected == 0, stats


def test_decision_is_deterministic_per_trace_id_within_a_rule(make_harness: Make) -> None:
    h = make_harness(
        sample_rate=0.0,
        selection_rules=[{"service_name": "checkout", "sample_rate": 0.5}],
        provider_factory=with_service("checkout"),
    )
    reference = TraceIdRatioSampler(0.5)
    decided = []
    for trace_id in TRACE_IDS + TRACE_IDS[:6]:
        h.ids.trace_ids.append(trace_id)
        before = h.evaluator.stats().captured
        turn(h)
        stats = h.evaluator.stats()
        # Above the highest rate's bound: skipped uncounted; below: counted and admitted by the rule.
        decided.append(stats.captured > before and stats.not_selected == 0)
    assert decided == [reference.should_sample(t) for t in TRACE_IDS + TRACE_IDS[:6]]
    assert 0 < sum(decided) < len(decided)
    stats = h.flush()
    assert judged(stats) == sum(decided)
    assert_accounted(stats)


def test_a_rule_refusing_half_is_counted_not_selected_per_trace(make_harness: Make) -> None:
    h = make_harness(sample_rate=1.0, selection_rules=[{"root_name": "root", "sample_rate": 0.5}])
    reference = TraceIdRatioSampler(0.5)
    for trace_id in TRACE_IDS:
        h.ids.trace_ids.append(trace_id)
        turn(h)
    stats = h.flush()
    selected = sum(reference.should_sample(t) for t in TRACE_IDS)
    assert judged(stats) == selected and stats.not_selected == len(TRACE_IDS) - selected
    assert stats.sampled_out == 0
    assert_accounted(stats)
