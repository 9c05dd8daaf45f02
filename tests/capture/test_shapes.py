"""More chain shapes: parallel retrievers, a retriever as the root, roots without retrieval, legacy
RetrievalQA, a LangGraph StateGraph, a model that only streams tokens, and inputs that break extraction."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypedDict
from uuid import UUID

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    BaseCallbackHandler,
    CallbackManagerForLLMRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough

from .conftest import ANSWER, CHUNKS, QUESTION, FixedRetriever, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]
WAIT_S = 10.0

A_CHUNKS = ["Green tea contains antioxidants called catechins.", "Catechins are antioxidants."]
B_CHUNKS = ["The antioxidants in green tea reduce inflammation.", "Green tea may boost metabolism."]


class _Signals(BaseCallbackHandler):
    """Test-only handler placed AFTER ours in the callback list: when it sees an event, our handler
    has already processed it. Sets an event per (callback, retriever name)."""

    run_inline = True

    def __init__(self) -> None:
        self.events: dict[tuple[str, str], threading.Event] = {}
        self.names: dict[UUID, str] = {}

    def event(self, callback: str, name: str) -> threading.Event:
        return self.events.setdefault((callback, name), threading.Event())

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, **kwargs: Any) -> None:
        name = str(kwargs.get("name"))
        self.names[run_id] = name
        self.event("start", name).set()

    def on_retriever_end(self, documents: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.event("end", self.names[run_id]).set()


class _Gate(BaseCallbackHandler):
    """Test-only handler placed BEFORE ours: holds retriever "b"'s start until our handler has seen
    retriever "a" start, so that the start order is a, b even though the branches run on threads."""

    def __init__(self, signals: _Signals) -> None:
        self.signals = signals

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: UUID, **kwargs: Any) -> None:
        if kwargs.get("name") == "b":
            assert self.signals.event("start", "a").wait(WAIT_S)


class _WaitingRetriever(BaseRetriever):
    """Returns ``texts`` once ``wait_for`` is set: retriever "a" ends only after "b" has ended."""

    texts: list[str]
    wait_for: Any = None  # threading.Event | None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.wait_for is not None:
            assert self.wait_for.wait(WAIT_S)
        return [Document(page_content=t) for t in self.texts]

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.wait_for is not None:
            assert await asyncio.to_thread(self.wait_for.wait, WAIT_S)
        return [Document(page_content=t) for t in self.texts]


def _two_retriever_chain(signals: _Signals) -> Any:
    a = _WaitingRetriever(texts=A_CHUNKS, wait_for=signals.event("end", "b")).with_config(run_name="a")
    b = _WaitingRetriever(texts=B_CHUNKS).with_config(run_name="b")
    prompt = ChatPromptTemplate.from_template("Context: {a} {b}\nQuestion: {question}")
    parallel = RunnableParallel(a=a, b=b, question=RunnablePassthrough())
    return parallel | prompt | FakeListChatModel(responses=[ANSWER]) | StrOutputParser()


def test_parallel_retrievers_merge_in_start_order_not_end_order(make_rig: MakeRig) -> None:
    rig = make_rig()
    signals = _Signals()
    chain = _two_retriever_chain(signals)
    chain.invoke(QUESTION, config={"callbacks": [_Gate(signals), rig.handler, signals]})
    rig.only()
    # Started a then b (the gate), ended b then a (a waits for b's end): chunks follow the starts.
    assert rig.judge.calls == [(QUESTION, ANSWER, A_CHUNKS + B_CHUNKS)]
    assert_accounted(rig)


async def test_parallel_retrievers_async_merge_in_start_order(make_rig: MakeRig) -> None:
    rig = make_rig()
    signals = _Signals()
    chain = _two_retriever_chain(signals)
    await chain.ainvoke(QUESTION, config={"callbacks": [rig.handler, signals]})
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, A_CHUNKS + B_CHUNKS)]
    assert_accounted(rig)


def test_retriever_as_root_is_a_standalone_retrieval_not_an_interaction(make_rig: MakeRig) -> None:
    """A retriever run with no parent (and no run of the handler in its context) has no generation to
    judge: not captured, not a drop; counted in ``standalone_retrievals`` (docs/capture.md)."""
    rig = make_rig()
    documents = FixedRetriever().invoke(QUESTION, config={"callbacks": [rig.handler]})
    assert len(documents) == len(CHUNKS)
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, stats.finished) == (0, 0)
    assert rig.handler.standalone_retrievals == 1
    assert rig.judge.calls == []
    assert_accounted(rig)


def test_roots_without_retrieval_are_not_interactions(make_rig: MakeRig) -> None:
    rig = make_rig()
    model = FakeListChatModel(responses=["hello"])
    model.invoke("hi", config={"callbacks": [rig.handler]})  # a root chat model run
    prompt = ChatPromptTemplate.from_template("Say {x}")
    (prompt | model | StrOutputParser()).invoke({"x": "hi"}, config={"callbacks": [rig.handler]})
    rig.flush()
    stats = rig.handler.stats()
    assert stats.captured == 0 and stats.finished == 0
    assert_accounted(rig)


def test_legacy_retrieval_qa_with_config_callbacks(make_rig: MakeRig) -> None:
    from langchain_classic.chains import RetrievalQA

    rig = make_rig()
    qa = RetrievalQA.from_chain_type(llm=FakeListChatModel(responses=[ANSWER]), retriever=FixedRetriever())
    out = qa.invoke({"query": QUESTION}, config={"callbacks": [rig.handler]})
    assert out["result"] == ANSWER
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert_accounted(rig)


def test_legacy_retrieval_qa_with_constructor_callbacks_uses_source_documents(make_rig: MakeRig) -> None:
    """Constructor callbacks of a legacy chain are not inherited: the handler sees the root only, and
    takes the documents from ``source_documents`` in its output."""
    from langchain_classic.chains import RetrievalQA

    rig = make_rig()
    qa = RetrievalQA.from_chain_type(
        llm=FakeListChatModel(responses=[ANSWER]),
        retriever=FixedRetriever(),
        return_source_documents=True,
        callbacks=[rig.handler],
    )
    qa.invoke({"query": QUESTION})
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert_accounted(rig)


class _GraphState(TypedDict, total=False):
    question: str
    context: list[Document]
    answer: str


def _graph() -> Any:
    from langgraph.graph import END, START, StateGraph

    retriever = FixedRetriever()
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    model = FakeListChatModel(responses=[ANSWER])

    def retrieve(state: _GraphState) -> _GraphState:
        return {"context": retriever.invoke(state["question"])}

    def generate(state: _GraphState) -> _GraphState:
        message = model.invoke(prompt.invoke({"context": state["context"], "question": state["question"]}))
        return {"answer": str(message.content)}

    graph = StateGraph(_GraphState)
    graph.add_node("retrieve", retrieve)
    graph.add_node("generate", generate)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "generate")
    graph.add_edge("generate", END)
    return graph.compile()


def test_langgraph_state_graph(make_rig: MakeRig) -> None:
    rig = make_rig()
    final = _graph().invoke({"question": QUESTION}, config={"callbacks": [rig.handler]})
    assert final["answer"] == ANSWER
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert_accounted(rig)


async def test_langgraph_state_graph_ainvoke(make_rig: MakeRig) -> None:
    rig = make_rig()
    await _graph().ainvoke({"question": QUESTION}, config={"callbacks": [rig.handler]})
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert_accounted(rig)


class _TokensOnlyChatModel(BaseChatModel):
    """A real BaseChatModel that reports its answer only through ``on_llm_new_token`` and returns a
    message without text (as some providers do when the content is delivered as stream events)."""

    tokens: list[str]

    @property
    def _llm_type(self) -> str:
        return "tokens-only-test-model"

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        for token in self.tokens:
            if run_manager is not None:
                run_manager.on_llm_new_token(token)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=""))])


def test_answer_assembled_from_tokens_when_llm_end_has_no_text(make_rig: MakeRig) -> None:
    rig = make_rig()
    tokens = ["Green tea ", "contains ", "antioxidants."]
    rag_chain(model=_TokensOnlyChatModel(tokens=tokens)).invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.only()
    assert rig.judge.calls == [(QUESTION, "".join(tokens), list(CHUNKS))]
    assert_accounted(rig)


class _HostileInput(Mapping[str, Any]):
    """A mapping whose ``get`` raises: the query extractor fails on it, the chain does not."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: str, default: Any = None) -> Any:
        raise RuntimeError("no get for you")


def test_a_failing_extractor_loses_nothing_else(make_rig: MakeRig) -> None:
    rig = make_rig()
    chain = RunnableLambda(lambda x: x["question"]) | rag_chain()
    assert chain.invoke(_HostileInput({"question": QUESTION}), config={"callbacks": [rig.handler]}) == ANSWER
    rig.only()
    # The root input could not be read: the query falls back to the retriever's.
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert rig.handler.callback_errors == {"query_from_inputs": 1}
