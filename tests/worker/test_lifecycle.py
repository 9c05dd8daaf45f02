from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

import pytest

from ctxutil_otel.metric import ContextualUtilization
from ctxutil_otel.sampling import TraceIdRatioSampler
from tests.support.accounting import assert_accounted
from tests.support.doubles import RecordingEmitter

from .conftest import GateJudge, MakeEvaluator, interaction, run_in_forked_child


def test_force_flush_returns_false_at_its_deadline_then_true(make_evaluator: MakeEvaluator) -> None:
    judge = GateJudge()
    evaluator = make_evaluator(ContextualUtilization(judge=judge))
    item = interaction()
    evaluator.admit(item.trace_id).submit(item)
    assert judge.entered.wait(5)
    assert evaluator.force_flush(50) is False
    judge.release()
    assert evaluator.force_flush(5000) is True
    assert evaluator.stats().evaluated == 1


def test_force_flush_with_nothing_pending_is_true(make_evaluator: MakeEvaluator) -> None:
    assert make_evaluator().force_flush(0) is True


def test_shutdown_flushes_what_it_can_then_counts_the_rest(make_evaluator: MakeEvaluator) -> None:
    # Interactions whose query contains "quick" pass the gate; the others block until released.
    judge = GateJudge(skip_word="quick")
    emitter = RecordingEmitter()
    evaluator = make_evaluator(ContextualUtilization(judge=judge), emitter=emitter, max_concurrency=1)
    queries = ["quick one", "quick two", "quick three", "blocked", "quick four", "quick five"]
    for query in queries:
        item = interaction(query=query)
        assert evaluator.admit(item.trace_id).submit(item)
    assert judge.entered.wait(5)  # the fourth holds the only slot; two wait behind it

    started = time.monotonic()
    assert evaluator.shutdown(timeout_millis=200) is False
    elapsed = time.monotonic() - started
    assert elapsed < 0.2 + 2.0  # generous sanity bound only; the deadline is honoured, not timed

    stats = evaluator.stats()
    assert stats.evaluated == 3
    assert stats.dropped == {"shutdown": 3}
    assert (stats.in_flight, stats.queue_size) == (0, 0)
    assert [i.query for i, _, _ in emitter.emitted] == ["quick one", "quick two", "quick three"]
    assert not evaluator._engine.thread.is_alive()  # the blocked judge call was cancelled

    # After shutdown: capture is refused at sample() and counted, flush has nothing to wait for.
    late = interaction()
    assert evaluator.admit(late.trace_id).refused == "shutdown"
    assert evaluator.stats().dropped == {"shutdown": 4}
    assert evaluator.force_flush(0) is True
    assert evaluator.shutdown(0) is True  # idempotent
    assert_accounted(evaluator.stats())


def test_shutdown_within_the_deadline_finishes_everything(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(emitter=emitter)
    for _ in range(20):
        item = interaction()
        evaluator.admit(item.trace_id).submit(item)
    assert evaluator.shutdown(10_000) is True
    stats = evaluator.stats()
    assert stats.finished == 20 and stats.dropped_total == 0
    assert len(emitter.emitted) == 20
    assert not evaluator._engine.thread.is_alive()


def test_50_threads_x_100_submits_are_accounted_exactly(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(emitter=emitter, sample_rate=0.5, max_queue_size=10_000, max_concurrency=16)
    sampler = TraceIdRatioSampler(0.5)
    start = threading.Barrier(50)
    offered: list[list[tuple[int, str]]] = [[] for _ in range(50)]

    def worker(t: int) -> None:
        rng = random.Random(t)
        start.wait()
        for i in range(100):
            kind = "no_answer" if i % 10 == 0 else "ok"
            item = interaction(
                rng.getrandbits(128), answer=None if kind == "no_answer" else "Python is a language"
            )
            if ticket := evaluator.admit(item.trace_id):
                assert ticket.submit(item)
            offered[t].append((item.trace_id, kind))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(50)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert evaluator.force_flush(30_000)

    everything = [entry for per_thread in offered for entry in per_thread]
    sampled = [(tid, kind) for tid, kind in everything if sampler.should_sample(tid)]
    stats = evaluator.stats()
    assert stats.captured == 5000
    assert stats.sampled_out == 5000 - len(sampled)
    assert stats.dropped == {"not_evaluable": sum(kind == "no_answer" for _, kind in sampled)}
    assert stats.evaluated + stats.not_applicable == sum(kind == "ok" for _, kind in sampled)
    assert len(emitter.emitted) == stats.evaluated + stats.not_applicable
    assert_accounted(stats)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_keeps_evaluating(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(emitter=emitter)
    for _ in range(3):
        item = interaction()
        evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(5000)

    def child() -> dict[str, Any]:
        for _ in range(7):
            item = interaction()
            evaluator.admit(item.trace_id).submit(item)
        flushed = evaluator.force_flush(10_000)
        stats = evaluator.stats()
        report: dict[str, Any] = {
            "flushed": flushed,
            "captured": stats.captured,
            "finished": stats.finished,
            "scored": stats.evaluated + stats.not_applicable,
            "emitted": len(emitter.emitted),
            "thread_alive": evaluator._engine.thread.is_alive(),
        }
        report["shutdown"] = evaluator.shutdown(5000)
        return report

    report = run_in_forked_child(child)
    # The child's counters start at zero; it evaluates its own 7 on a fresh thread.
    assert report == {
        "flushed": True,
        "captured": 7,
        "finished": 7,
        "scored": 7,
        "emitted": 3 + 7,  # the emitter's list was copied at fork
        "thread_alive": True,
        "shutdown": True,
    }
    # The parent is untouched and still evaluating.
    assert evaluator.stats().captured == 3
    item = interaction()
    evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(5000)
    assert evaluator.stats().finished == 4
    assert len(emitter.emitted) == 4
