from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import Sequence

import pytest

from ctxutil_otel.judges import JudgeResult
from ctxutil_otel.metric import ContextualUtilization
from tests.support.accounting import assert_accounted
from tests.support.doubles import RecordingEmitter
from tests.support.gate import Gate, report

from .conftest import BoomError, GateJudge, MakeEvaluator, RaisingJudge, UsageJudge, interaction


def _offer(evaluator: object, n: int) -> list[bool]:
    """Sample (at rate 1) and submit ``n`` interactions; return whether each was admitted by both
    (a refusal at sample() means the interaction is already counted and is never submitted)."""
    answers = []
    for _ in range(n):
        item = interaction()
        answers.append(evaluator.admit(item.trace_id).submit(item))  # type: ignore[attr-defined]
    return answers


def test_judge_error_is_failed_with_its_error_type(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(ContextualUtilization(judge=RaisingJudge(BoomError("nope"))), emitter=emitter)
    _offer(evaluator, 3)
    assert evaluator.force_flush(5000)
    assert evaluator.stats().failed == {"boom": 3}
    assert emitter.labels() == ["error"] * 3
    assert {result.error_type for _, result, _ in emitter.emitted} == {"boom"}


def test_any_exception_from_the_judge_is_failed_as_other(make_evaluator: MakeEvaluator) -> None:
    # error.type stays in the documented vocabulary: an exception class name is not one of it.
    evaluator = make_evaluator(ContextualUtilization(judge=RaisingJudge(KeyError("x"))))
    _offer(evaluator, 2)
    assert evaluator.force_flush(5000)
    assert evaluator.stats().failed == {"_OTHER": 2}


class HangingJudge:
    """Never answers (until cancelled); reports its cancellation to a :class:`Gate` (a real socket: the
    judge may run in the process worker's child). Only the gate's address is pickled."""

    name = "hanging"
    model: str | None = None

    def __init__(self) -> None:
        self.gate: Gate | None = Gate()
        self.address = self.gate.address

    def __getstate__(self) -> dict[str, object]:
        return {"address": self.address, "gate": None}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)

    @property
    def cancelled(self) -> threading.Event:
        assert self.gate is not None
        return self.gate.cancelled

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            report(self.address, "cancelled")
            raise
        raise AssertionError("unreachable")


def test_judge_hanging_past_the_timeout_fails_with_timeout(make_evaluator: MakeEvaluator) -> None:
    judge = HangingJudge()
    emitter = RecordingEmitter()
    evaluator = make_evaluator(
        ContextualUtilization(judge=judge), emitter=emitter, evaluation_timeout_s=0.05, max_concurrency=4
    )
    _offer(evaluator, 4)
    assert evaluator.force_flush(10_000)
    assert evaluator.stats().failed == {"timeout": 4}
    assert judge.cancelled.is_set()  # the hung call was cancelled, not leaked
    [result] = {(r.label, r.error_type, r.judge_name) for _, r, _ in emitter.emitted}
    assert result == ("error", "timeout", "hanging")


def test_slow_judge_with_full_queue_drops_newest_without_blocking(
    make_evaluator: MakeEvaluator, caplog: pytest.LogCaptureFixture
) -> None:
    judge = GateJudge()
    emitter = RecordingEmitter()
    evaluator = make_evaluator(
        ContextualUtilization(judge=judge), emitter=emitter, max_queue_size=5, max_concurrency=1
    )
    assert _offer(evaluator, 1) == [True]
    assert judge.entered.wait(5)  # the judge is now blocked holding the only slot
    assert _offer(evaluator, 5) == [True] * 5  # fills the queue
    # submit() returns at once while the judge is blocked (had it waited, this thread would hang here)
    with caplog.at_level(logging.WARNING, logger="ctxutil_otel.worker"):
        assert _offer(evaluator, 10) == [False] * 10
    warnings = [r for r in caplog.records if "queue_full" in r.getMessage()]
    assert len(warnings) == 1  # throttled: one message per interval, not one per drop
    stats = evaluator.stats()
    assert (stats.in_flight, stats.queue_size, dict(stats.dropped)) == (1, 5, {"queue_full": 10})
    assert judge.calls == 1
    judge.release()
    assert evaluator.force_flush(5000)
    stats = evaluator.stats()
    assert stats.evaluated == 6 and stats.dropped == {"queue_full": 10}
    assert len(emitter.emitted) == 6


def test_concurrency_limit_holds(make_evaluator: MakeEvaluator) -> None:
    judge = GateJudge()
    evaluator = make_evaluator(ContextualUtilization(judge=judge), max_concurrency=3)
    _offer(evaluator, 10)
    assert judge.entered.wait(5)
    assert not evaluator.force_flush(100)  # blocked: cannot finish
    stats = evaluator.stats()
    assert stats.in_flight == 3 and stats.queue_size == 7
    assert judge.calls == 3
    judge.release()
    assert evaluator.force_flush(5000)
    assert evaluator.stats().evaluated == 10


def test_rate_cap_drops_rate_limited(make_evaluator: MakeEvaluator) -> None:
    # 0.001 evaluations/s: a burst of one, the next token in 1000 s.
    evaluator = make_evaluator(max_evaluations_per_second=0.001)
    items = [interaction() for _ in range(5)]
    # Refused at admit(), before the caller captures anything; the admitted one took the token.
    answers = [evaluator.admit(item.trace_id) for item in items]
    assert [a.refused for a in answers] == [None, *["rate_limited"] * 4]
    assert [bool(a) for a in answers] == [True, False, False, False, False]
    assert evaluator.stats().dropped == {"rate_limited": 4}
    assert answers[0].submit(items[0])  # the cap is not applied twice
    assert evaluator.force_flush(5000)
    stats = evaluator.stats()
    assert stats.dropped == {"rate_limited": 4}
    assert stats.evaluated + stats.not_applicable == 1


def test_token_budget_is_charged_with_reported_usage(make_evaluator: MakeEvaluator) -> None:
    # 1000 tokens/minute; every evaluation reports 600 tokens.
    evaluator = make_evaluator(
        ContextualUtilization(judge=UsageJudge(600)), judge_token_budget_per_minute=1000
    )
    assert _offer(evaluator, 1) == [True]  # cost unknown yet: admitted
    assert evaluator.force_flush(5000)  # 600 spent, ~400 left
    assert _offer(evaluator, 1) == [True]  # level positive: admitted, 600 reserved (in debt now)
    assert _offer(evaluator, 2) == [False, False]  # spent: refused until refilled (~12 s away)
    assert evaluator.force_flush(5000)
    stats = evaluator.stats()
    assert stats.evaluated == 2
    assert stats.dropped == {"token_budget": 2}


def test_zero_rate_cap_and_zero_budget_mean_unlimited(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(
        ContextualUtilization(judge=UsageJudge(10**6)),
        max_evaluations_per_second=0,
        judge_token_budget_per_minute=0,
    )
    assert all(_offer(evaluator, 50))
    assert evaluator.force_flush(5000)
    assert evaluator.stats().evaluated == 50


def test_random_mix_of_failures_keeps_exact_accounting(make_evaluator: MakeEvaluator) -> None:
    rng = random.Random(11)
    evaluator = make_evaluator(max_queue_size=50, max_evaluations_per_second=0)
    expected_not_evaluable = 0
    for _ in range(300):
        kind = rng.choice(["ok", "no_answer", "bad_chunk", "discard"])
        item = interaction(
            answer=None if kind == "no_answer" else "Python is a language",
            documents=[object()] if kind == "bad_chunk" else ["Python is a language"],
        )
        ticket = evaluator.admit(item.trace_id)
        if not ticket:
            continue
        if kind == "discard":
            ticket.drop("chain_error")
        elif ticket.submit(item) and kind == "no_answer":
            expected_not_evaluable += 1
    assert evaluator.force_flush(5000)
    stats = evaluator.stats()
    assert stats.dropped.get("not_evaluable", 0) == expected_not_evaluable
    assert stats.captured == stats.finished == 300


def test_a_full_queue_refuses_at_sample_and_again_at_submit(make_evaluator: MakeEvaluator) -> None:
    judge = GateJudge()
    evaluator = make_evaluator(ContextualUtilization(judge=judge), max_queue_size=2, max_concurrency=1)
    assert _offer(evaluator, 1) == [True]
    assert judge.entered.wait(5)  # holds the only slot: what is submitted now stays queued
    # Three admitted at capture while the queue had room; by their submit it has filled.
    admitted = [interaction() for _ in range(3)]
    tickets = [evaluator.admit(item.trace_id) for item in admitted]
    assert all(tickets)
    assert [t.submit(item) for t, item in zip(tickets, admitted, strict=True)] == [True, True, False]
    # Once full, capture itself is refused (the caller stops capturing at once).
    assert evaluator.admit(interaction().trace_id).refused == "queue_full"
    assert evaluator.stats().dropped == {"queue_full": 2}
    judge.release()
    assert evaluator.force_flush(5000)
    stats = evaluator.stats()
    assert (stats.evaluated, dict(stats.dropped)) == (3, {"queue_full": 2})
    assert_accounted(stats)


def test_a_spent_token_budget_refuses_at_sample(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(
        ContextualUtilization(judge=UsageJudge(5000)), judge_token_budget_per_minute=1000
    )
    assert _offer(evaluator, 1) == [True]
    assert evaluator.force_flush(5000)  # 5000 spent of 1000: in debt for minutes
    assert evaluator.admit(interaction().trace_id).refused == "token_budget"
    stats = evaluator.stats()
    assert (stats.evaluated, dict(stats.dropped)) == (1, {"token_budget": 1})
    assert_accounted(stats)
