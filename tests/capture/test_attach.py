"""Runs LangChain reports without a parent inside a traced root, and roots that wrap their attempts.

* A LangGraph node (or a tool) that hands the handler explicitly to a retriever or a model
  (``config={"callbacks": [handler]}``) starts a callback manager without a parent: the run is attached
  to the node's run through LangChain's running-config context (issue 15 item 3).
* ``with_fallbacks`` at the root passes its attempts the caller's callbacks instead of its child
  manager, so each attempt is reported without a parent (issue 10 item 7); ``with_retry``,
  ``RunnableBranch`` and a routing lambda at the root are the rest of the class: one interaction per
  root call, judged on what the attempt that succeeded retrieved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableBranch, RunnableLambda, RunnablePassthrough
from langchain_core.tools import tool

from .conftest import ANSWER, CHUNKS, QUESTION, FixedRetriever, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]
OTHER = ["Oolong is partly oxidised.", "Black tea is fully oxidised."]


class _State(TypedDict, total=False):
    question: str
    context: list[Document]
    answer: str


def _graph(handler: Any, *, explicit_model: bool = False) -> Any:
    """retrieve -> generate, the retrieve node handing ``handler`` to the retriever explicitly."""
    from langgraph.graph import END, START, StateGraph

    retriever = FixedRetriever()
    model = FakeListChatModel(responses=[ANSWER])
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")

    def retrieve(state: _State) -> _State:
        return {"context": retriever.invoke(state["question"], config={"callbacks": [handler]})}

    async def aretrieve(state: _State) -> _State:
        return {"context": await retriever.ainvoke(state["question"], config={"callbacks": [handler]})}

    def generate(state: _State) -> _State:
        config: Any = {"callbacks": [handler]} if explicit_model else None
        message = model.invoke(prompt.invoke(dict(state)), config=config)
        return {"answer": str(message.content)}

    graph = StateGraph(_State)
    graph.add_node("retrieve", retrieve)
    graph.add_node("aretrieve", aretrieve)
    graph.add_node("generate", generate)
    graph.add_conditional_edges(
        START, lambda state: "aretrieve" if state.get("answer") == "async" else "retrieve"
    )
    graph.add_edge("retrieve", "generate")
    graph.add_edge("aretrieve", "generate")
    graph.add_edge("generate", END)
    return graph.compile()


def test_langgraph_node_with_an_explicit_handler_is_one_interaction(make_rig: MakeRig) -> None:
    rig = make_rig()
    graph = _graph(rig.handler)
    for _ in range(3):
        assert graph.invoke({"question": QUESTION}, config={"callbacks": [rig.handler]})["answer"] == ANSWER
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, stats.evaluated + stats.not_applicable, dict(stats.dropped)) == (3, 3, {})
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))] * 3
    assert rig.handler.standalone_retrievals == 0
    assert_accounted(rig)


async def test_langgraph_async_node_with_an_explicit_handler_is_one_interaction(make_rig: MakeRig) -> None:
    rig = make_rig()
    graph = _graph(rig.handler, explicit_model=True)
    await graph.ainvoke({"question": QUESTION, "answer": "async"}, config={"callbacks": [rig.handler]})
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert (rig.handler.stats().captured, dict(rig.handler.stats().dropped)) == (1, {})
    assert_accounted(rig)


def test_a_graph_without_the_handler_leaves_its_node_retrieval_standalone(make_rig: MakeRig) -> None:
    """Only the node's retriever has the handler: nothing around it is tracked, so it is a standalone
    retrieval (no generation to judge), counted in ``standalone_retrievals`` and not as a drop."""
    rig = make_rig()
    _graph(rig.handler).invoke({"question": QUESTION})
    rig.flush()
    assert (rig.handler.stats().captured, rig.handler.standalone_retrievals) == (0, 1)
    assert_accounted(rig)


def test_a_tool_that_calls_a_retriever_with_the_handler_is_part_of_the_root(make_rig: MakeRig) -> None:
    rig = make_rig()
    retriever = FixedRetriever()

    @tool
    def search(query: str) -> str:
        """Search the tea notes."""
        documents = retriever.invoke(query, config={"callbacks": [rig.handler]})
        return "\n".join(document.page_content for document in documents)

    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    chain = (
        {"context": RunnableLambda(lambda q: search.invoke(q)), "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=[ANSWER])
        | StrOutputParser()
    )
    chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert rig.handler.stats().captured == 1
    assert_accounted(rig)


class _Broken(RuntimeError):
    pass


def _retrieve_then_fail() -> Any:
    """A RAG attempt that retrieves OTHER and then fails."""

    def boom(_: Any) -> Any:
        raise _Broken("primary model down")

    return {"context": FixedRetriever(texts=OTHER), "question": RunnablePassthrough()} | RunnableLambda(boom)


def test_root_fallbacks_count_one_interaction_per_call(make_rig: MakeRig) -> None:
    rig = make_rig()
    chain = rag_chain().with_fallbacks([rag_chain(FixedRetriever(texts=OTHER))])
    for _ in range(10):
        assert chain.invoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, stats.evaluated + stats.not_applicable, dict(stats.dropped)) == (10, 10, {})
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))] * 10
    assert_accounted(rig)


def test_root_fallback_after_a_failed_attempt_is_judged_on_its_own_retrieval(make_rig: MakeRig) -> None:
    rig = make_rig()
    chain = _retrieve_then_fail().with_fallbacks([rag_chain()])
    assert chain.invoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    rig.only()
    # The failed attempt's documents never reached a prompt.
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert (rig.handler.stats().captured, dict(rig.handler.stats().dropped)) == (1, {})
    assert_accounted(rig)


async def test_root_fallbacks_async(make_rig: MakeRig) -> None:
    rig = make_rig()
    chain = _retrieve_then_fail().with_fallbacks([rag_chain()])
    assert await chain.ainvoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert (rig.handler.stats().captured, dict(rig.handler.stats().dropped)) == (1, {})
    assert_accounted(rig)


def test_root_fallbacks_that_all_fail_are_one_chain_error(make_rig: MakeRig) -> None:
    rig = make_rig()
    chain = _retrieve_then_fail().with_fallbacks([_retrieve_then_fail()])
    with pytest.raises(_Broken):
        chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, dict(stats.dropped)) == (1, {"chain_error": 1})
    assert_accounted(rig)


def test_root_retry_is_judged_on_the_attempt_that_succeeded(make_rig: MakeRig) -> None:
    rig = make_rig()
    attempts: list[int] = []
    retrievers = iter([FixedRetriever(texts=OTHER), FixedRetriever()])

    def flaky(x: Any) -> Any:
        attempts.append(1)
        if len(attempts) == 1:
            raise _Broken("transient")
        return x

    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    chain = (
        {"context": RunnableLambda(lambda q: next(retrievers).invoke(q)), "question": RunnablePassthrough()}
        | RunnableLambda(flaky)
        | prompt
        | FakeListChatModel(responses=[ANSWER])
        | StrOutputParser()
    ).with_retry(stop_after_attempt=2, wait_exponential_jitter=False)
    assert chain.invoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert rig.handler.stats().captured == 1
    assert_accounted(rig)


def test_root_branch_and_router_are_one_interaction_each(make_rig: MakeRig) -> None:
    rig = make_rig()
    branch = RunnableBranch((lambda q: "tea" in q, rag_chain()), rag_chain(FixedRetriever(texts=OTHER)))
    router = RunnableLambda(lambda q: rag_chain())  # a lambda returning the runnable to run
    assert branch.invoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    assert router.invoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    rig.flush()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))] * 2
    assert (rig.handler.stats().captured, dict(rig.handler.stats().dropped)) == (2, {})
    assert_accounted(rig)


def test_an_attempt_under_a_root_no_longer_tracked_is_not_a_second_root(make_rig: MakeRig) -> None:
    """Sampled out at the first attempt's retrieval, the wrapper root leaves the table; the fallback
    attempt, reported without a parent, must not start a second root (found by the fault test, with
    eviction instead of sampling)."""
    rig = make_rig(sample_rate=0.0)
    chain = _retrieve_then_fail().with_fallbacks([rag_chain()])
    for _ in range(5):
        assert chain.invoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, stats.sampled_out) == (5, 5)
    assert rig.judge.calls == []
    assert_accounted(rig)
