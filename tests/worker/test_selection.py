"""The Evaluator's selection (issue 12 item 1): rules decide with facts, the fallback without; a matching
rule's refusal is ``not_selected``, in ``admit`` (``lost=`` included) and ``would_sample`` alike.

Real parts: the real Evaluator with the lexical judge; nothing is submitted (admission only).
"""

from __future__ import annotations

import logging

import pytest

from ctxutil_otel import ContextualUtilization
from ctxutil_otel._selection import SelectionFacts, SelectionRule
from ctxutil_otel.sampling import TraceIdRatioSampler
from ctxutil_otel.worker import Evaluator

from ..support.accounting import assert_accounted

SUPPORT = SelectionFacts(root_name="support-faq")
OTHER = SelectionFacts(root_name="search")


class NoEmitter:
    def emit(self, *args: object) -> None:
        raise AssertionError("nothing is evaluated here")

    def observe(self, *args: object) -> None:
        pass


def evaluator(**settings: object) -> Evaluator:
    return Evaluator(ContextualUtilization(), emitter=NoEmitter(), max_evaluations_per_second=0, **settings)


def test_a_matching_rule_decides_and_no_facts_fall_back() -> None:
    ev = evaluator(sample_rate=1.0, selection_rules=[SelectionRule(root_name="support-*", sample_rate=0.0)])
    try:
        assert ev.admit(1, SUPPORT).refused == "not_selected"
        assert not ev.would_sample(1, SUPPORT)
        assert ev.would_sample(1, OTHER) and ev.would_sample(1)
        admitted = ev.admit(1, OTHER)
        assert admitted
        admitted.drop("not_evaluable")
        ev.admit(1, SUPPORT, lost="ttl_expired")  # lost, but a rule would not have selected it
        ev.admit(1, lost="ttl_expired")  # no facts: the fallback rate 1 selects, so it is a drop
        stats = ev.stats()
        assert (stats.captured, stats.not_selected, stats.sampled_out) == (4, 2, 0), stats
        assert dict(stats.dropped) == {"not_evaluable": 1, "ttl_expired": 1}
        assert stats.outcomes()[("not_selected", None)] == 2
        assert_accounted(stats)
    finally:
        ev.shutdown(5_000)


def test_the_selection_bound_is_the_highest_rate() -> None:
    ev = evaluator(sample_rate=0.1, selection_rules=[{"tags": ["a"], "sample_rate": 0.7}])
    plain = evaluator(sample_rate=0.1)
    try:
        assert ev.selection_bound == TraceIdRatioSampler.bound_for_rate(0.7)
        assert plain.selection_bound == TraceIdRatioSampler.bound_for_rate(0.1)
    finally:
        ev.shutdown(5_000)
        plain.shutdown(5_000)


class Unprintable:
    """A metadata value whose ``str()`` raises: the rule's match cannot be decided."""

    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_a_rule_match_that_raises_is_a_capture_error_not_a_sampling_decision(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ev = evaluator(sample_rate=1.0, selection_rules=[{"metadata": {"team": "a"}, "sample_rate": 1.0}])
    broken = SelectionFacts(root_name="x", metadata={"team": Unprintable()})
    try:
        with caplog.at_level(logging.ERROR, logger="ctxutil_otel.worker"):
            assert not ev.would_sample(1, broken)
            assert ev.admit(1, broken).refused == "capture_error"
            assert ev.admit(2, broken).refused == "capture_error"
        stats = ev.stats()
        assert (stats.captured, stats.sampled_out, stats.not_selected) == (2, 0, 0), stats
        assert dict(stats.dropped) == {"capture_error": 2}
        assert_accounted(stats)
        failures = [r for r in caplog.records if "selection failed" in r.getMessage()]
        assert len(failures) == 1, [r.getMessage() for r in caplog.records]
    finally:
        ev.shutdown(5_000)
