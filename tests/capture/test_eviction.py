"""Every root run ends in exactly one outcome, also when it is evicted before its first retrieval
(issue 10 item 6: with ``max_pending_runs=20``, 96 of 100 concurrent async RAG calls vanished)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from langchain_core.callbacks import CallbackManager

from .conftest import ANSWER, QUESTION, FixedRetriever, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]


async def test_concurrent_async_calls_beyond_the_bound_are_all_counted(make_rig: MakeRig) -> None:
    calls = 200
    rig = make_rig(max_pending_runs=20, max_queue_size=calls)
    chain = rag_chain(FixedRetriever())
    outputs = await asyncio.gather(
        *(chain.ainvoke(f"{QUESTION} ({i})", config={"callbacks": [rig.handler]}) for i in range(calls))
    )
    assert outputs == [ANSWER] * calls
    rig.flush()
    stats = rig.handler.stats()
    judged = stats.evaluated + stats.not_applicable
    # Each call is counted once: judged, or dropped pending_full (evicted before or after retrieving).
    assert stats.captured == calls, stats
    assert judged + stats.dropped.get("pending_full", 0) == calls, stats
    assert set(stats.dropped) <= {"pending_full"}
    assert stats.dropped.get("pending_full", 0) > 0  # the bound was really exceeded
    assert len(rig.judge.calls) == judged
    assert_accounted(rig)


def test_a_root_evicted_before_retrieving_is_counted_and_its_late_retrieval_ignored(
    make_rig: MakeRig,
) -> None:
    rig = make_rig(max_pending_runs=2)
    manager = CallbackManager.configure(inheritable_callbacks=[rig.handler])
    first = manager.on_chain_start({"name": "rag"}, {"question": QUESTION})
    step = first.get_child().on_chain_start({"name": "step"}, {"question": QUESTION})  # 2 runs: full
    second = manager.on_chain_start({"name": "rag"}, {"question": QUESTION})  # evicts the first root
    assert dict(rig.handler.stats().dropped) == {"pending_full": 1}
    # The evicted root now retrieves and ends: nothing more is counted for it.
    retriever = step.get_child().on_retriever_start({"name": "retriever"}, QUESTION)
    retriever.on_retriever_end([])
    step.on_chain_end({})
    first.on_chain_end({"answer": ANSWER})
    second.on_chain_end({"answer": ANSWER})  # never retrieved, ended normally: not an interaction
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, dict(stats.dropped)) == (1, {"pending_full": 1})
    assert_accounted(rig)
