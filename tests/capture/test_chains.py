"""Chain shapes: what the handler captures from real LangChain runnables reaches the metric intact."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda

from .conftest import ANSWER, CHUNKS, QUESTION, FixedRetriever, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]


def test_lcel_invoke_with_config_callbacks(make_rig: MakeRig) -> None:
    rig = make_rig()
    run_id = uuid.uuid4()
    output = rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler], "run_id": run_id})

    interaction, result = rig.only()
    assert output == ANSWER
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert interaction.id == str(run_id)
    assert interaction.source == "langchain"
    assert [d.page_content for d in interaction.documents] == list(CHUNKS)  # type: ignore[attr-defined]
    assert 0 < interaction.start_time_ns <= interaction.end_time_ns
    assert result.label in ("pass", "fail")
    stats = rig.handler.stats()
    assert (stats.captured, stats.evaluated) == (1, 1)
    assert_accounted(rig)


def test_handler_bound_with_with_config(make_rig: MakeRig) -> None:
    rig = make_rig()
    chain = rag_chain().with_config(callbacks=[rig.handler])
    assert chain.invoke(QUESTION) == ANSWER
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert_accounted(rig)


def test_handler_attached_twice_submits_once(make_rig: MakeRig) -> None:
    """``with_config(callbacks=[h])`` plus ``config={"callbacks": [h]}``: LangChain reports the root run
    to the handler twice; it is still one interaction."""
    rig = make_rig()
    chain = rag_chain().with_config(callbacks=[rig.handler])
    chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert rig.handler.stats().captured == 1
    assert_accounted(rig)


def test_dict_input_query_key_is_preferred(make_rig: MakeRig) -> None:
    rig = make_rig()
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    chain = (
        {
            "context": RunnableLambda(lambda x: x["question"]) | FixedRetriever(),
            "question": RunnableLambda(lambda x: x["question"]),
        }
        | prompt
        | FakeListChatModel(responses=[ANSWER])
        | StrOutputParser()
    )
    chain.invoke({"user": "someone", "question": QUESTION}, config={"callbacks": [rig.handler]})
    rig.only()
    assert rig.judge.calls[0][0] == QUESTION
    assert_accounted(rig)


async def test_lcel_ainvoke(make_rig: MakeRig) -> None:
    rig = make_rig()
    assert await rag_chain().ainvoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert_accounted(rig)


def _keyed_retriever(questions: list[str]) -> FixedRetriever:
    return FixedRetriever(by_query={q: [f"{q} -- fact {k}" for k in range(3)] for q in questions})


def test_lcel_batch_keeps_each_root_apart(make_rig: MakeRig) -> None:
    rig = make_rig()
    questions = [f"Question number {i} about tea?" for i in range(6)]
    outputs = rag_chain(_keyed_retriever(questions)).batch(questions, config={"callbacks": [rig.handler]})
    assert outputs == [ANSWER] * len(questions)
    rig.flush()
    seen = {query: chunks for query, _, chunks in rig.judge.calls}
    assert seen == {q: [f"{q} -- fact {k}" for k in range(3)] for q in questions}
    assert len({i.id for i in rig.interactions()}) == len(questions)
    assert rig.handler.stats().captured == len(questions)
    assert_accounted(rig)


async def test_lcel_abatch_keeps_each_root_apart(make_rig: MakeRig) -> None:
    rig = make_rig()
    questions = [f"Async question {i} about tea?" for i in range(6)]
    await rag_chain(_keyed_retriever(questions)).abatch(questions, config={"callbacks": [rig.handler]})
    rig.flush()
    seen = {query: chunks for query, _, chunks in rig.judge.calls}
    assert seen == {q: [f"{q} -- fact {k}" for k in range(3)] for q in questions}
    assert_accounted(rig)


def _streaming_model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content=ANSWER)]))


def test_lcel_stream_query_arrives_with_the_end_and_answer_is_assembled(make_rig: MakeRig) -> None:
    rig = make_rig()
    pieces = list(rag_chain(model=_streaming_model()).stream(QUESTION, config={"callbacks": [rig.handler]}))
    assert len(pieces) > 1  # really streamed
    rig.only()
    # The root run starts with the placeholder input {"input": ""}; the query comes with its end.
    assert rig.judge.calls == [(QUESTION, "".join(pieces), list(CHUNKS))]
    assert "".join(pieces) == ANSWER
    assert_accounted(rig)


async def test_lcel_astream(make_rig: MakeRig) -> None:
    rig = make_rig()
    chain = rag_chain(model=_streaming_model())
    pieces = [piece async for piece in chain.astream(QUESTION, config={"callbacks": [rig.handler]})]
    assert len(pieces) > 1
    rig.only()
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS))]
    assert_accounted(rig)


def test_content_blocks_answer_is_the_text_parts(make_rig: MakeRig) -> None:
    rig = make_rig()
    blocks: list[str | dict[str, Any]] = [
        {"type": "text", "text": "Green tea contains antioxidants"},
        {"type": "image_url", "image_url": {"url": "data:,"}},
        {"type": "text", "text": " called catechins."},
    ]
    model = GenericFakeChatModel(messages=iter([AIMessage(content=blocks)]))
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    # No output parser: the root output is the message itself, the answer comes from on_llm_end.
    chain = {"context": FixedRetriever(), "question": lambda x: x} | prompt | model
    chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.only()
    assert rig.judge.calls[0][1] == "Green tea contains antioxidants called catechins."
    assert_accounted(rig)


def test_empty_generation_is_an_empty_answer_not_a_missing_one(make_rig: MakeRig) -> None:
    rig = make_rig()
    rag_chain(model=FakeListChatModel(responses=[""])).invoke(QUESTION, config={"callbacks": [rig.handler]})
    _, result = rig.only()
    assert rig.judge.calls == [(QUESTION, "", list(CHUNKS))]
    # DESIGN.md: an empty answer with relevant chunks scores 0.0 (relevant context ignored).
    if result.signals.total_relevant_chunks:
        assert result.score == 0.0
    else:
        assert result.label == "not_applicable"
    assert_accounted(rig)


def test_retriever_returning_nothing_is_submitted_and_not_applicable(make_rig: MakeRig) -> None:
    rig = make_rig()
    rag_chain(FixedRetriever(texts=())).invoke(QUESTION, config={"callbacks": [rig.handler]})
    _, result = rig.only()
    assert result.label == "not_applicable"
    assert rig.handler.stats().not_applicable == 1
    assert_accounted(rig)


def test_last_llm_run_is_the_answer(make_rig: MakeRig) -> None:
    """A query-rewriting model before retrieval, the answering model after: the last one wins."""
    rig = make_rig()
    rewrite = FakeListChatModel(responses=[QUESTION]) | StrOutputParser()
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    chain = (
        rewrite
        | {"context": FixedRetriever(), "question": lambda x: x}
        | prompt
        | FakeListChatModel(responses=[ANSWER])
        | StrOutputParser()
    )
    chain.invoke("green tea good for what", config={"callbacks": [rig.handler]})
    rig.only()
    assert rig.judge.calls == [("green tea good for what", ANSWER, list(CHUNKS))]
    assert_accounted(rig)


def test_unsampled_root_is_counted_once_and_frees_its_state_at_the_decision(make_rig: MakeRig) -> None:
    rig = make_rig(sample_rate=0.0)
    seen_pending: list[int] = []

    def look(answer: str) -> str:
        seen_pending.append(rig.handler.pending_runs)
        return answer

    chain = rag_chain() | RunnableLambda(look)
    chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, stats.sampled_out) == (1, 1)
    assert rig.judge.calls == []
    assert seen_pending == [0]  # nothing tracked after the decision, while the chain still runs
    assert_accounted(rig)
