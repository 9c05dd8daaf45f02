"""The LangChain handler's hand-off to the evaluator: no call into the worker while the run table's lock
is held, and a root that leaves the table while its first retrieval asks for the decision is settled
once, by that retrieval, with its ticket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxutil_otel import ContextualUtilization
from ctxutil_otel.capture import UtilizationCallbackHandler
from ctxutil_otel.worker import Admission, Evaluator, Ticket

from ..support.accounting import assert_accounted
from ..support.doubles import RecordingEmitter
from .conftest import ANSWER, FixedRetriever, RecordingJudge, rag_chain


class WatchingEvaluator(Evaluator):
    """A real Evaluator whose ``admit`` records whether the handler's run table was locked, and runs
    ``during`` (once) while the decision is being asked."""

    def __init__(self, **settings: Any) -> None:
        super().__init__(
            ContextualUtilization(judge=RecordingJudge()), emitter=RecordingEmitter(), **settings
        )
        self.locked: list[bool] = []
        self.handler: UtilizationCallbackHandler | None = None
        self.during: Callable[[], None] | None = None

    def admit(self, trace_id: int, facts: Any = None, *, lost: Any = None) -> Ticket | Admission:
        assert self.handler is not None
        self.locked.append(self.handler._runs._lock.locked())
        answer = super().admit(trace_id, facts, lost=lost)
        during, self.during = self.during, None
        if during is not None:
            during()
        return answer


def _rig(**settings: Any) -> tuple[WatchingEvaluator, UtilizationCallbackHandler]:
    evaluator = WatchingEvaluator(sample_rate=1.0, max_evaluations_per_second=0, **settings)
    handler = UtilizationCallbackHandler(evaluator)
    evaluator.handler = handler
    return evaluator, handler


def test_the_decision_is_asked_outside_the_run_table_lock() -> None:
    evaluator, handler = _rig()
    try:
        assert rag_chain().invoke("what is green tea?", config={"callbacks": [handler]}) == ANSWER
        assert handler.force_flush(10_000)
        assert evaluator.locked == [False]
        assert evaluator.stats().evaluated == 1
    finally:
        evaluator.shutdown(5000)


def test_a_root_drained_while_deciding_is_counted_shutdown_by_the_decider() -> None:
    evaluator, handler = _rig()
    evaluator.during = lambda: handler._outcomes.lost((r, "shutdown") for r in handler._runs.drain())
    try:
        rag_chain().invoke("what is green tea?", config={"callbacks": [handler]})
        assert handler.force_flush(10_000)
        stats = evaluator.stats()
        assert (stats.captured, dict(stats.dropped), stats.evaluated) == (1, {"shutdown": 1}, 0)
        assert_accounted(stats)
        assert handler.pending_runs == 0
    finally:
        evaluator.shutdown(5000)


def test_a_root_that_ends_while_deciding_is_finished_by_the_decider() -> None:
    """The root's end callback arrives (another thread's view) while its first retrieval is still asking:
    the end is recorded on the root and the retrieval's callback finishes it with the ticket (here the
    retrieval had returned nothing yet: submitted with no chunks, ``not_applicable``, counted once)."""
    evaluator, handler = _rig()
    ended: list[bool] = []

    def end_the_root() -> None:
        [root] = list(handler._runs._roots.values())
        ended.append(handler._runs.finish_root(root, ("finished", ANSWER, None)))
        assert root.exit is not None

    evaluator.during = end_the_root
    try:
        retriever = FixedRetriever()
        rag_chain(retriever).invoke("what is green tea?", config={"callbacks": [handler]})
        assert handler.force_flush(10_000)
        stats = evaluator.stats()
        assert ended == [False]  # deferred to the decider, which finished it
        assert (stats.captured, stats.not_applicable, dict(stats.dropped)) == (1, 1, {})
        assert_accounted(stats)
    finally:
        evaluator.shutdown(5000)
