"""One handler, 50 threads x 100 invocations of mixed shapes: exact accounting per outcome.

Every invocation runs inside an OpenTelemetry span (an SDK tracer provider without exporters), so its
trace id, and therefore the Evaluator's deterministic sampling decision, is known to the test.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langchain_core.language_models import FakeListChatModel
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from opentelemetry.sdk.trace import TracerProvider

from ctxutil_otel.sampling import TraceIdRatioSampler

from .conftest import ANSWER, FixedRetriever, Rig, rag_chain

MakeRig = Callable[..., Rig]
THREADS = 50
PER_THREAD = 100
RATE = 0.5


class _Failure(RuntimeError):
    pass


def _fail(_: Any) -> Any:
    raise _Failure("boom")


def test_fifty_threads_one_handler_exact_accounting(make_rig: MakeRig) -> None:
    rig = make_rig(sample_rate=RATE, max_queue_size=THREADS * PER_THREAD)
    handler = rig.handler
    tracer = TracerProvider().get_tracer("test")
    sampler = TraceIdRatioSampler(RATE)
    retriever = FixedRetriever(by_query={})
    rag = rag_chain(retriever)
    failing = {"context": retriever, "question": RunnablePassthrough()} | RunnableLambda(_fail)
    retrieve_only = RunnablePassthrough() | retriever
    plain = FakeListChatModel(responses=["no retrieval here"])
    start = threading.Barrier(THREADS)

    def work(thread: int) -> Counter[str]:
        expected: Counter[str] = Counter()
        start.wait()
        for i in range(PER_THREAD):
            kind = i % 10
            question = f"thread {thread} question {i} about green tea?"
            with tracer.start_as_current_span("request") as span:
                sampled = sampler.should_sample(span.get_span_context().trace_id)
                if kind == 0:  # the chain fails after retrieving
                    with contextlib.suppress(_Failure):
                        failing.invoke(question, config={"callbacks": [handler]})
                    outcome = "chain_error"
                elif kind == 1:  # a chain that only retrieves: no answer
                    retrieve_only.invoke(question, config={"callbacks": [handler]})
                    outcome = "not_evaluable"
                elif kind == 2:  # no retrieval: not an interaction at all
                    plain.invoke(question, config={"callbacks": [handler]})
                    continue
                else:
                    assert rag.invoke(question, config={"callbacks": [handler]}) == ANSWER
                    outcome = "judged"
            expected["captured"] += 1
            expected[outcome if sampled else "sampled_out"] += 1
            if sampled and outcome == "judged":
                expected[question] += 1
        return expected

    with ThreadPoolExecutor(THREADS) as pool:
        expected = sum(pool.map(work, range(THREADS)), Counter())

    rig.flush()
    stats = handler.stats()
    assert stats.captured == expected["captured"] == THREADS * PER_THREAD * 9 // 10
    assert stats.sampled_out == expected["sampled_out"]
    assert dict(stats.dropped) == {
        k: v
        for k, v in (("chain_error", expected["chain_error"]), ("not_evaluable", expected["not_evaluable"]))
        if v
    }
    assert stats.evaluated + stats.not_applicable == expected["judged"]
    assert dict(stats.failed) == {}
    assert stats.captured == stats.finished
    # Each sampled interaction reached the metric exactly once, with its own query.
    judged = Counter(query for query, _, _ in rig.judge.calls)
    assert judged == Counter({q: n for q, n in expected.items() if q.startswith("thread ")})
    assert handler.pending_runs == 0
    assert handler.callback_errors == {}
