"""Run state: errors free it, runs that never end are evicted (TTL: ``ttl_expired``; size bound:
``pending_full``), late events are ignored.

Runs that never end are driven through LangChain's real ``CallbackManager`` (the same object a chain
uses to call its handlers), stopping before the end callbacks.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.callbacks import (
    CallbackManager,
    CallbackManagerForChainRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from ctxutil_otel.capture import UtilizationCallbackHandler
from tests.support.doubles import FakeClock

from .conftest import ANSWER, CHUNKS, QUESTION, FixedRetriever, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]


def _start_unfinished(
    handler: UtilizationCallbackHandler, *, retrieve: bool = True
) -> tuple[CallbackManagerForChainRun, CallbackManagerForRetrieverRun | None]:
    """A root chain run (and a retriever run under it) started through LangChain's callback manager."""
    manager = CallbackManager.configure(inheritable_callbacks=[handler])
    root = manager.on_chain_start({"name": "rag"}, {"question": QUESTION})
    if not retrieve:
        return root, None
    retriever = root.get_child().on_retriever_start({"name": "retriever"}, QUESTION)
    return root, retriever


class _BrokenError(RuntimeError):
    pass


def _boom(_: Any) -> Any:
    raise _BrokenError("generation failed")


def test_chain_error_submits_nothing_and_frees_state(make_rig: MakeRig) -> None:
    rig = make_rig()
    chain = {"context": FixedRetriever(), "question": RunnablePassthrough()} | RunnableLambda(_boom)
    with pytest.raises(_BrokenError):  # the application's own error, untouched
        chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.flush()
    stats = rig.handler.stats()
    assert stats.captured == 1 and dict(stats.dropped) == {"chain_error": 1}
    assert rig.judge.calls == [] and rig.emitter.emitted == []
    assert_accounted(rig)


async def test_async_chain_error(make_rig: MakeRig) -> None:
    rig = make_rig()
    chain = {"context": FixedRetriever(), "question": RunnablePassthrough()} | RunnableLambda(_boom)
    with pytest.raises(_BrokenError):
        await chain.ainvoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.flush()
    assert dict(rig.handler.stats().dropped) == {"chain_error": 1}
    assert_accounted(rig)


def test_unsampled_chain_error_is_only_sampled_out(make_rig: MakeRig) -> None:
    rig = make_rig(sample_rate=0.0)
    chain = {"context": FixedRetriever(), "question": RunnablePassthrough()} | RunnableLambda(_boom)
    with pytest.raises(_BrokenError):
        chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, stats.sampled_out, dict(stats.dropped)) == (1, 1, {})
    assert_accounted(rig)


class _FailingRetriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        raise _BrokenError("index unavailable")


def test_failing_root_retriever_is_a_standalone_retrieval(make_rig: MakeRig) -> None:
    rig = make_rig()
    with pytest.raises(_BrokenError):
        _FailingRetriever().invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.flush()
    assert rig.handler.stats().captured == 0 and rig.handler.standalone_retrievals == 1
    assert_accounted(rig)


def test_failing_retriever_under_a_chain_is_a_chain_error(make_rig: MakeRig) -> None:
    rig = make_rig()
    with pytest.raises(_BrokenError):
        rag_chain(_FailingRetriever()).invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.flush()
    assert dict(rig.handler.stats().dropped) == {"chain_error": 1}
    assert_accounted(rig)


def test_a_failed_child_the_root_recovers_from_is_not_an_error(make_rig: MakeRig) -> None:
    rig = make_rig()
    model = RunnableLambda(_boom).with_fallbacks([FakeListChatModel(responses=[ANSWER])])
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    chain = (
        {"context": FixedRetriever(), "question": RunnablePassthrough()} | prompt | model | StrOutputParser()
    )
    assert chain.invoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert_accounted(rig)


def test_runs_that_never_end_expire_after_the_ttl(make_rig: MakeRig) -> None:
    clock = FakeClock()
    rig = make_rig(run_ttl_s=10.0, clock=clock)
    stuck_root, stuck_retriever = _start_unfinished(rig.handler)
    silent_root, _ = _start_unfinished(rig.handler, retrieve=False)  # not retrieved yet: counted if lost
    assert rig.handler.pending_runs == 3

    clock.now += 9.9  # not yet expired: a new root start does not evict
    rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler]})
    assert rig.handler.pending_runs == 3 and not rig.handler.stats().dropped

    clock.now += 0.1  # 10 s since the stuck roots started: evicted on the next root start
    rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler]})
    assert rig.handler.pending_runs == 0
    # Both expired roots are counted: whether the silent one would have retrieved is unknowable.
    assert dict(rig.handler.stats().dropped) == {"ttl_expired": 2}

    # Late events of the evicted runs are ignored: nothing submitted, nothing counted twice.
    assert stuck_retriever is not None
    stuck_retriever.on_retriever_end([Document(page_content=CHUNKS[0])])
    stuck_root.on_chain_end({"answer": ANSWER})
    silent_root.on_chain_end({"answer": ANSWER})
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, stats.evaluated + stats.not_applicable) == (4, 2)
    assert len(rig.judge.calls) == 2
    assert_accounted(rig)


def test_pending_runs_stay_within_max_pending_runs(make_rig: MakeRig) -> None:
    clock = FakeClock()  # never advanced: every eviction here is for the bound, none for age
    rig = make_rig(max_pending_runs=5, clock=clock)
    started = []
    for _ in range(20):
        started.append(_start_unfinished(rig.handler))
        assert rig.handler.pending_runs <= 5
    # Each root holds 2 runs (itself and its retriever): the oldest were evicted as they came.
    alive = rig.handler.pending_runs // 2
    assert alive >= 1
    assert dict(rig.handler.stats().dropped) == {"pending_full": 20 - alive}

    # The handler keeps working at the bound, and the tail of stuck roots can still finish.
    rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler]})
    assert rig.handler.pending_runs <= 5
    alive = rig.handler.pending_runs // 2  # the chain's own runs evicted a few more stuck roots
    for root, _retriever in started:
        root.on_chain_error(RuntimeError("cancelled"))
    rig.flush()
    stats = rig.handler.stats()
    assert stats.captured == 21
    # The evicted roots' errors are ignored (already counted); only the live ones are chain errors.
    assert dict(stats.dropped) == {"pending_full": 20 - alive, "chain_error": alive}
    assert stats.evaluated + stats.not_applicable == 1
    assert_accounted(rig)


def test_eviction_for_room_counts_an_expired_root_as_ttl_expired_and_a_young_one_as_pending_full(
    make_rig: MakeRig,
) -> None:
    """At the bound, a child's start makes room: a root already past ``run_ttl_s`` (that no root start
    swept yet) is ``ttl_expired``, a younger oldest root evicted for room is ``pending_full``."""
    clock = FakeClock()
    rig = make_rig(run_ttl_s=10.0, max_pending_runs=4, clock=clock)
    old_root, old_retriever = _start_unfinished(rig.handler)  # 2 runs
    clock.now += 5.0
    young_root, young_retriever = _start_unfinished(rig.handler)  # 4 runs: the table is full
    assert rig.handler.pending_runs == 4 and not rig.handler.stats().dropped

    clock.now += 5.0  # the old root is 10 s old: expired, but only a sweep evicts it
    young_root.get_child().on_chain_start({"name": "prompt"}, {"question": QUESTION})  # needs room
    assert dict(rig.handler.stats().dropped) == {"ttl_expired": 1}
    assert rig.handler.pending_runs == 3  # the young root, its retriever and the new step

    new_root, new_retriever = _start_unfinished(rig.handler)  # its retriever needs room
    assert dict(rig.handler.stats().dropped) == {"ttl_expired": 1, "pending_full": 1}
    assert rig.handler.pending_runs == 2  # the young root (5 s old) was evicted with its runs

    # Late events of both evicted roots are ignored; the survivor still ends in one outcome.
    assert old_retriever is not None and young_retriever is not None and new_retriever is not None
    for retriever in (old_retriever, young_retriever, new_retriever):
        retriever.on_retriever_end([Document(page_content=CHUNKS[0])])
    old_root.on_chain_end({"answer": ANSWER})
    young_root.on_chain_end({"answer": ANSWER})
    new_root.on_chain_error(RuntimeError("cancelled"))
    rig.flush()
    stats = rig.handler.stats()
    assert stats.captured == 3
    assert dict(stats.dropped) == {"ttl_expired": 1, "pending_full": 1, "chain_error": 1}
    assert rig.judge.calls == []
    assert_accounted(rig)


def test_handler_attached_below_the_root_captures_nothing(make_rig: MakeRig) -> None:
    """Documented scope: attach the handler to the outermost runnable. Bound only to an inner
    retriever it sees a run whose parent it never saw; it ignores it and holds nothing."""
    rig = make_rig()
    retriever = FixedRetriever().with_config(callbacks=[rig.handler])
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    chain = {"context": retriever, "question": RunnablePassthrough()} | prompt
    chain.invoke(QUESTION)
    rig.flush()
    assert rig.handler.stats().captured == 0
    assert_accounted(rig)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_starts_with_empty_run_state_and_keeps_capturing(make_rig: MakeRig) -> None:
    rig = make_rig()
    parent_root, parent_retriever = _start_unfinished(rig.handler)  # captured in the parent
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report through the pipe, never return into pytest
        status = 1
        try:
            assert parent_retriever is not None
            parent_retriever.on_retriever_end([Document(page_content=CHUNKS[0])])
            parent_root.on_chain_end({"answer": ANSWER})  # the parent's run: not the child's to submit
            pending_after_parent_run = rig.handler.pending_runs
            rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler]})
            flushed = rig.handler.force_flush(10_000)
            s = rig.handler.stats()
            judged = s.evaluated + s.not_applicable
            report = f"{pending_after_parent_run} {flushed} {s.captured} {s.finished} {judged}"
            os.write(write, report.encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    report = os.read(read, 200).decode()
    os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0, report
    # The child's evaluator counts only the child's own interaction, evaluated exactly once.
    assert report == "0 True 1 1 1"
    # The parent is untouched by the child: its run is still pending there.
    assert rig.handler.pending_runs == 2
    parent_root.on_chain_error(RuntimeError("cancelled"))
    rig.flush()
    assert dict(rig.handler.stats().dropped) == {"chain_error": 1}
    assert_accounted(rig)


def test_a_root_refused_at_capture_is_dropped_and_no_longer_tracked(make_rig: MakeRig) -> None:
    # A rate cap of 0.001/s admits one interaction (the bucket's burst), then none for 1000 s.
    rig = make_rig(max_evaluations_per_second=0.001)
    chain = rag_chain()
    chain.invoke(QUESTION, config={"callbacks": [rig.handler]})  # takes the one token

    root, retriever = _start_unfinished(rig.handler)
    assert retriever is not None
    # Refused at the first retrieval: counted at once, and the handler holds nothing for this root,
    # so its later callbacks (documents, the model's answer, the root's end) do no capture work.
    stats = rig.handler.stats()
    assert (stats.captured, dict(stats.dropped)) == (2, {"rate_limited": 1})
    assert rig.handler.pending_runs == 0
    retriever.on_retriever_end([Document(page_content=chunk) for chunk in CHUNKS])
    root.on_chain_end({"output": ANSWER})

    rig.flush()
    stats = rig.handler.stats()
    assert (stats.evaluated, dict(stats.dropped)) == (1, {"rate_limited": 1})
    assert len(rig.judge.calls) == 1
    assert_accounted(rig)


def test_a_root_captured_at_its_end_that_is_not_evaluable_spends_no_admission(make_rig: MakeRig) -> None:
    # A root with no retriever run whose output carries documents (a legacy chain with the handler on
    # the root only) is captured at its end; without an answer it is lost, and counted without taking
    # the rate cap's only token (0.001/s: one token, the next in 1000 s).
    rig = make_rig(max_evaluations_per_second=0.001)
    sources_only = RunnableLambda(lambda q: {"source_documents": [Document(page_content=c) for c in CHUNKS]})
    sources_only.invoke({"query": QUESTION}, config={"callbacks": [rig.handler]})
    assert dict(rig.handler.stats().dropped) == {"not_evaluable": 1}
    rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler]})  # the token is still there
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, stats.evaluated, dict(stats.dropped)) == (2, 1, {"not_evaluable": 1})
    assert_accounted(rig)


def test_shutdown_counts_the_runs_still_in_progress(make_rig: MakeRig) -> None:
    rig = make_rig()
    root, retriever = _start_unfinished(rig.handler)  # captured (sampled at its retrieval), never ends
    _start_unfinished(rig.handler, retrieve=False)  # not retrieved yet: lost at shutdown, counted too
    assert rig.handler.pending_runs == 3
    assert rig.handler.shutdown(5_000) is False  # runs were still in progress
    stats = rig.handler.stats()
    assert (stats.captured, dict(stats.dropped)) == (2, {"shutdown": 2})
    assert rig.handler.pending_runs == 0
    assert retriever is not None  # its late events are ignored
    retriever.on_retriever_end([Document(page_content=CHUNKS[0])])
    root.on_chain_end({"output": ANSWER})
    assert rig.handler.stats().finished == 2
    assert_accounted(rig)


def test_an_unsampled_root_captured_at_its_end_does_no_capture_work(
    make_rig: MakeRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The interaction assembly is replaced by one that fails the test if called (a spy, not a mock of
    # a part: the chain, handler and evaluator are real). Out of the sample, the root is only counted.
    from ctxutil_otel.capture import _extract

    def must_not_run(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("interaction assembled for a root outside the sample")

    monkeypatch.setattr(_extract, "interaction_of", must_not_run)
    rig = make_rig(sample_rate=0.0)
    sources_only = RunnableLambda(lambda q: {"source_documents": [Document(page_content=c) for c in CHUNKS]})
    sources_only.invoke({"query": QUESTION}, config={"callbacks": [rig.handler]})
    stats = rig.handler.stats()
    assert (stats.captured, stats.sampled_out) == (1, 1)
    assert_accounted(rig)  # includes: no callback errors
