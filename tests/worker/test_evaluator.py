from __future__ import annotations

import gc
import logging
import random
import weakref
from typing import Any

import pytest
from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

from ctxutil_otel import DatasetItem
from ctxutil_otel.judges import LexicalJudge, SemanticJudge
from ctxutil_otel.metric import ContextualUtilization
from ctxutil_otel.worker import Evaluator
from tests.support.accounting import assert_accounted
from tests.support.doubles import RecordingEmitter

from .conftest import GateJudge, MakeEvaluator, UsageJudge, interaction


async def test_evaluates_like_the_metric_and_hands_results_to_the_emitter(
    make_evaluator: MakeEvaluator,
) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(emitter=emitter)
    sent = [interaction(id=f"run-{i}") for i in range(5)]
    for item in sent:
        ticket = evaluator.admit(item.trace_id)
        assert ticket
        assert ticket.submit(item)
    assert evaluator.force_flush(5000)

    expected = await ContextualUtilization(judge=LexicalJudge()).execute(
        DatasetItem(
            query=sent[0].query or "",
            actual_output=sent[0].answer or "",
            retrieved_content=list(map(str, sent[0].documents)),
        )
    )
    assert sorted(i.id or "" for i, _, _ in emitter.emitted) == [f"run-{i}" for i in range(5)]
    for item, result, duration_s in emitter.emitted:
        assert result.item_id == item.id
        assert (result.score, result.label) == (expected.score, expected.label)
        assert duration_s >= 0
    stats = evaluator.stats()
    assert stats.captured == 5
    assert stats.evaluated + stats.not_applicable == 5
    assert stats.evaluated == (5 if expected.label in ("pass", "fail") else 0)


async def test_the_emitter_gets_the_metric_s_result_in_full(make_evaluator: MakeEvaluator) -> None:
    # In the process worker the result crosses the pipe (as JSON, chunk texts refilled in the parent):
    # what the emitter gets, chunk texts it may capture included, is what the metric returned.
    metric = ContextualUtilization(judge=LexicalJudge())
    emitter = RecordingEmitter()
    evaluator = make_evaluator(metric, emitter=emitter)
    documents = [
        "Python is a high-level programming language.",
        {"page_content": "Guido van Rossum created Python."},
        "Python is a high-level programming language.",  # a duplicate
        "Ice cream is a frozen dessert.",
    ]
    item = interaction(documents=documents, id="run-full")
    assert evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(30_000)
    [(_, result, _)] = emitter.emitted
    expected = await metric.execute(
        DatasetItem(
            query=item.query or "",
            actual_output=item.answer or "",
            retrieved_content=documents,
            id="run-full",
        )
    )
    assert result.signals.chunk_breakdown and result.signals.chunk_breakdown[0].chunk_text == documents[0]
    assert result == expected


def test_default_metric_is_built_from_settings(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(threshold=0.9, mode="fast")
    assert isinstance(evaluator.metric.judge, SemanticJudge)  # the default judge (issue 26)
    assert evaluator.metric.threshold == 0.9
    assert evaluator.metric.mode.value == "fast"


def test_sampling_decision_is_the_same_across_evaluators(make_evaluator: MakeEvaluator) -> None:
    rng = random.Random(7)
    ids = [rng.getrandbits(128) for _ in range(2000)]
    a = make_evaluator(sample_rate=0.25)
    b = make_evaluator(sample_rate=0.25)
    answers_a = [a.admit(t) for t in ids]
    answers_b = [b.admit(t) for t in ids]
    decisions_a, decisions_b = [bool(x) for x in answers_a], [bool(x) for x in answers_b]
    sdk = TraceIdRatioBased(0.25)
    assert decisions_a == decisions_b
    assert decisions_a == [
        sdk.should_sample(None, t, "x").decision is Decision.RECORD_AND_SAMPLE for t in ids
    ]
    for evaluator, answers, decisions in ((a, answers_a, decisions_a), (b, answers_b, decisions_b)):
        for answer in answers:
            answer.drop("chain_error")  # keep the accounting closed without evaluating (refusals: no-op)
        stats = evaluator.stats()
        assert stats.captured == 2000
        assert stats.sampled_out == decisions.count(False)
        assert stats.dropped == {"chain_error": decisions.count(True)}


def test_ten_percent_evaluator_samples_a_subset_of_twenty_percent(make_evaluator: MakeEvaluator) -> None:
    rng = random.Random(8)
    ids = [rng.getrandbits(128) for _ in range(5000)]
    low, high = make_evaluator(sample_rate=0.1), make_evaluator(sample_rate=0.2)
    low_answers, high_answers = {t: low.admit(t) for t in ids}, {t: high.admit(t) for t in ids}
    ten = {t for t, answer in low_answers.items() if answer}
    twenty = {t for t, answer in high_answers.items() if answer}
    assert ten and ten < twenty
    for answer in (*low_answers.values(), *high_answers.values()):
        answer.drop("chain_error")


def test_sample_rate_zero_counts_everything_sampled_out(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(sample_rate=0.0)
    assert not any(evaluator.admit(random.getrandbits(128)) for _ in range(100))
    stats = evaluator.stats()
    assert (stats.captured, stats.sampled_out) == (100, 100)


def test_missing_content_is_dropped_not_evaluable_and_not_emitted(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(emitter=emitter)
    for item in (interaction(answer=None), interaction(query=None), interaction(query="   ")):
        assert evaluator.admit(item.trace_id).submit(item)  # admitted; the worker decides it is not evaluable
    assert evaluator.force_flush(5000)
    assert evaluator.stats().dropped == {"not_evaluable": 3}
    assert emitter.emitted == []


def test_invalid_chunk_fails_with_invalid_input_and_an_error_result(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(emitter=emitter)
    secret = "a chunk text that must not appear in the error"
    bad = interaction(documents=[secret, 42])
    evaluator.admit(bad.trace_id).submit(bad)
    assert evaluator.force_flush(5000)
    assert evaluator.stats().failed == {"invalid_input": 1}
    [(_, result, _)] = emitter.emitted
    assert (result.label, result.error_type, result.score) == ("error", "invalid_input", None)
    assert "retrieved_content" in result.explanation and secret not in result.explanation
    assert result.signals.total_chunks == 2


def test_empty_answer_is_scored_zero(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(ContextualUtilization(judge=UsageJudge(0)), emitter=emitter)
    item = interaction(answer="")
    evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(5000)
    [(_, result, _)] = emitter.emitted
    assert (result.score, result.label) == (0.0, "fail")
    assert evaluator.stats().evaluated == 1


def test_no_chunks_is_not_applicable(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator()
    item = interaction(documents=[])
    evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(5000)
    assert evaluator.stats().not_applicable == 1


def test_discard_counts_each_reason(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator()
    for reason in ("chain_error", "ttl_expired", "ttl_expired"):
        ticket = evaluator.admit(random.getrandbits(128))
        assert ticket
        ticket.drop(reason)
    assert evaluator.stats().dropped == {"chain_error": 1, "ttl_expired": 2}


def test_judge_runs_with_instrumentation_suppressed_and_emit_without(make_evaluator: MakeEvaluator) -> None:
    judge = GateJudge()
    judge.release()
    emitter = RecordingEmitter()
    evaluator = make_evaluator(ContextualUtilization(judge=judge), emitter=emitter)
    for _ in range(3):
        item = interaction()
        evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(5000)
    assert judge.suppressed == [True, True, True]
    # The evaluation's own telemetry (span, log, metrics) must not be suppressed.
    assert emitter.suppressed_during_emit == [None, None, None]


def test_emitter_that_raises_never_breaks_the_worker(
    make_evaluator: MakeEvaluator, caplog: pytest.LogCaptureFixture
) -> None:
    emitter = RecordingEmitter(fail=True)
    evaluator = make_evaluator(emitter=emitter)
    with caplog.at_level(logging.WARNING, logger="ctxutil_otel.worker"):
        for _ in range(4):
            item = interaction()
            evaluator.admit(item.trace_id).submit(item)
        assert evaluator.force_flush(5000)
    assert len([r for r in caplog.records if "emitter raised" in r.getMessage()]) == 1  # logged once
    stats = evaluator.stats()
    assert len(emitter.emitted) == 4
    assert stats.emit_errors == 4
    assert stats.evaluated + stats.not_applicable == 4


def test_observe_reads_the_counters_at_collection_time(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(emitter=emitter, sample_rate=0.5)
    assert emitter.outcomes is not None and emitter.queue_size is not None
    assert emitter.outcomes()[("sampled_out", None)] == 0
    never, always = (1 << 64) - 1, 0  # low 64 bits at the top / bottom of the range
    assert not evaluator.admit(never) and not evaluator.admit(never)
    ticket = evaluator.admit(always)
    assert ticket
    ticket.drop("ttl_expired")
    outcomes = emitter.outcomes()
    assert outcomes[("sampled_out", None)] == 2
    assert outcomes[("dropped", "ttl_expired")] == 1
    assert outcomes[("evaluated", None)] == 0
    assert emitter.queue_size() == 0
    assert emitter.cpu_throttled_s is not None  # the worker CPU budget's wait (0 here: budget off)
    assert emitter.cpu_throttled_s() == evaluator.stats().cpu_throttled_s == 0.0


def test_outcomes_in_stats_match_the_observed_mapping(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(emitter=emitter)
    item = interaction(answer=None)
    evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(5000)
    assert emitter.outcomes is not None
    assert dict(emitter.outcomes()) == evaluator.stats().outcomes()
    assert evaluator.stats().outcomes()[("dropped", "not_evaluable")] == 1


def test_a_dropped_evaluator_finishes_its_queue_and_ends_its_thread() -> None:
    judge = GateJudge()
    emitter = RecordingEmitter()
    evaluator = Evaluator(ContextualUtilization(judge=judge), emitter=emitter, max_evaluations_per_second=0)
    engine_ref = weakref.ref(evaluator._engine)
    thread = evaluator._engine.thread
    for _ in range(3):
        item = interaction()
        evaluator.admit(item.trace_id).submit(item)
    assert judge.entered.wait(5)
    del evaluator
    gc.collect()
    assert thread.is_alive()  # still draining: the queued work is finished, not lost
    judge.release()
    thread.join(5)
    assert not thread.is_alive()
    assert len(emitter.emitted) == 3
    gc.collect()
    assert engine_ref() is None
    assert emitter.outcomes is not None and emitter.outcomes() == {}


def test_context_manager_shuts_down(make_evaluator: MakeEvaluator) -> None:
    with make_evaluator() as evaluator:
        item = interaction()
        evaluator.admit(item.trace_id).submit(item)
    assert not evaluator._engine.thread.is_alive()
    assert_accounted(evaluator.stats())
    assert evaluator.stats().finished == 1


def test_repr_shows_settings_not_secrets(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(judge_api_key="sk-very-secret", sample_rate=0.5)
    assert "sample_rate=0.5" in repr(evaluator)
    assert "sk-very-secret" not in repr(evaluator) + repr(evaluator.settings)


@pytest.mark.parametrize("reason", ["", "custom"])
def test_discard_with_any_reason_is_counted(make_evaluator: MakeEvaluator, reason: str) -> None:
    evaluator = make_evaluator()
    evaluator.admit(1).drop(reason)
    assert evaluator.stats().dropped == {reason or "unknown": 1}


def test_observe_sources_are_positional_for_wrappers_forwarding_args(make_evaluator: MakeEvaluator) -> None:
    # Emitter wrappers (the demo's, users' own) often forward ``observe(*args)``: a keyword would
    # make them raise, and then no observable metric at all would be registered.
    class Forwarding(RecordingEmitter):
        def observe(self, *args: Any) -> None:  # type: ignore[override]
            super().observe(*args)

    emitter = Forwarding()
    evaluator = make_evaluator(emitter=emitter)
    assert emitter.outcomes is not None and emitter.queue_size is not None
    assert emitter.cpu_throttled_s is not None
    assert emitter.outcomes() == evaluator.stats().outcomes()


def test_drop_counts_a_lost_capture_without_spending_admission(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(sample_rate=0.5, max_evaluations_per_second=0.001)  # one token, ever
    never, always = (1 << 64) - 1, 0  # low 64 bits at the top / bottom of the range
    evaluator.admit(never, lost="ttl_expired")  # not in the sample: sampled_out, whatever the reason
    evaluator.admit(always, lost="ttl_expired")
    evaluator.admit(always, lost="shutdown")
    stats = evaluator.stats()
    assert (stats.captured, stats.sampled_out, dict(stats.dropped)) == (
        3,
        1,
        {"ttl_expired": 1, "shutdown": 1},
    )
    ticket = evaluator.admit(always)
    assert ticket  # the rate cap's only token is still there
    ticket.drop("not_evaluable")
    assert_accounted(evaluator.stats())
