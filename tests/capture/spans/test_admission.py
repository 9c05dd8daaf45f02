"""Admission vs. loss in the span processor: a turn that is already lost (evicted for age or room, still
buffered at shutdown, not evaluable) is counted with its own reason through ``Evaluator.drop`` and takes
no admission: no rate-cap token, no look at the queue. Only a turn that closes and converts to an
interaction is admitted with ``Evaluator.sample``.

Real parts: the real OpenTelemetry SDK spans through the processor, the real Evaluator (its real token
bucket and bounded queue) with the lexical judge; the emitter and judge are the recorders of
tests/capture/conftest.py. The rate cap is one token that refills after 1000 s
(``max_evaluations_per_second=0.001``, burst ``max(1, rate)`` = 1), so no test depends on how fast it runs.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.trace import Span

from ctxutil_otel.judges import JudgeResult
from tests.support.accounting import assert_accounted

from ..conftest import RecordingJudge
from .conftest import Harness
from .test_processor import chat_attrs, retrieval_attrs

Make = Callable[..., Harness]
ONE_TOKEN = 0.001  # evaluations per second: a bucket of one token, refilled after 1000 s


def open_turn(h: Harness, name: str, query: str = "q") -> Span:
    """A trace whose retrieval and generation ended under a root that stays open: one buffered turn."""
    root = h.tracer.start_span(name)
    with trace.use_span(root):
        with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs(query, "c")):
            pass
        with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
            pass
    return root


def complete_turn(h: Harness, query: str) -> None:
    with h.tracer.start_as_current_span("root"):
        with h.tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs(query, "c")):
            pass
        with h.tracer.start_as_current_span("chat m", attributes=chat_attrs("a")):
            pass


def test_eviction_is_counted_with_its_reason_and_spends_no_token(make_harness: Make) -> None:
    """The review's reproduction: with one rate-cap token and room for two traces, a third open trace
    evicts the oldest (pending_full, not rate_limited), and the complete turn after it gets the token."""
    h = make_harness(max_evaluations_per_second=ONE_TOKEN, processor_kwargs={"max_pending_runs": 2})
    for n in range(3):
        open_turn(h, f"request that never ends {n}")
    assert h.processor.pending_traces == 2
    stats = h.evaluator.stats()
    assert (stats.captured, dict(stats.dropped)) == (1, {"pending_full": 1})

    complete_turn(h, "valid")  # its record evicts a second open trace, then its root closes the turn
    stats = h.flush()
    assert [call[0] for call in h.judge.calls] == ["valid"]
    assert stats.evaluated + stats.not_applicable == 1
    assert (stats.captured, dict(stats.dropped)) == (3, {"pending_full": 2})
    assert_accounted(stats)

    h.processor.shutdown(10_000)  # the one trace left: shutdown, though the token is spent now
    stats = h.evaluator.stats()
    assert (stats.captured, dict(stats.dropped)) == (4, {"pending_full": 2, "shutdown": 1})
    assert_accounted(stats)


def test_ttl_eviction_after_the_token_is_spent_is_ttl_expired(make_harness: Make) -> None:
    """Evicted for age once the bucket is empty: still ``ttl_expired`` (what the
    CtxutilEvaluationsDropped alert tells apart), never ``rate_limited``."""
    h = make_harness(max_evaluations_per_second=ONE_TOKEN, processor_kwargs={"run_ttl_s": 30})
    open_turn(h, "request that never ends")
    complete_turn(h, "valid")  # spends the one token
    h.clock.advance(31)
    with h.tracer.start_as_current_span("unrelated"):  # any span: the lazy TTL sweep runs on on_end
        pass
    stats = h.flush()
    assert h.processor.pending_traces == 0 and len(h.judge.calls) == 1
    assert (stats.captured, dict(stats.dropped)) == (2, {"ttl_expired": 1})
    assert_accounted(stats)


class BlockingJudge(RecordingJudge):
    """Records the call, signals ``started``, then never answers until cancelled by the evaluator's
    shutdown: the evaluation stays in flight, so the queue behind it stays full."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        with self._lock:
            self.calls.append((query, answer, list(chunks)))
        self.started.set()
        await asyncio.Event().wait()  # cancelled at shutdown
        raise AssertionError("unreachable: the event is never set")


def test_turns_buffered_at_shutdown_are_shutdown_even_with_the_queue_full(make_harness: Make) -> None:
    judge = BlockingJudge()
    h = make_harness(judge=judge, max_concurrency=1, max_queue_size=1)
    complete_turn(h, "in flight")
    assert judge.started.wait(10)  # synchronisation: the first evaluation holds the one slot
    complete_turn(h, "queued")
    assert h.evaluator.stats().queue_size == 1  # the queue is full now
    root = open_turn(h, "open at shutdown")
    assert h.processor.pending_traces == 1

    # Deadline 0: the evaluator does not wait for the blocked judge, and counts its two interactions
    # dropped shutdown itself; the buffered turn must be counted shutdown too, not queue_full.
    h.processor.shutdown(0)
    stats = h.evaluator.stats()
    assert (stats.captured, dict(stats.dropped)) == (3, {"shutdown": 3})
    assert [call[0] for call in judge.calls] == ["in flight"]
    assert_accounted(stats)
    root.end()  # after shutdown: ignored
    assert h.evaluator.stats().captured == 3


def test_a_not_evaluable_turn_spends_no_token(make_harness: Make) -> None:
    h = make_harness(max_evaluations_per_second=ONE_TOKEN)
    with h.tracer.start_as_current_span("root"):
        # content capture off: the opt-in attributes are absent, so the turn cannot become an interaction
        with h.tracer.start_as_current_span(
            "retrieval kb", attributes={"gen_ai.operation.name": "retrieval"}
        ):
            pass
        with h.tracer.start_as_current_span("chat m", attributes={"gen_ai.operation.name": "chat"}):
            pass
    complete_turn(h, "valid")
    stats = h.flush()
    assert [call[0] for call in h.judge.calls] == ["valid"]
    assert (stats.captured, dict(stats.dropped)) == (2, {"not_evaluable": 1})
    assert_accounted(stats)
