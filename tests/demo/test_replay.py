"""The demo's replaying chain returns each recorded answer, for every row of the bundled sample."""

from __future__ import annotations

from ctxutil_otel.data import load_sample
from ctxutil_otel.demo import ReplayChatModel, build_rag_chain, replay_parts


def test_every_sample_question_replays_its_recorded_answer_and_chunks() -> None:
    rows = load_sample()
    unique = {r["query"]: r for r in rows}  # the demo keeps the first of repeated questions
    chain = build_rag_chain(*replay_parts(list(unique.values())))
    answers = chain.batch(list(unique))
    assert answers == [r["actual_output"] for r in unique.values()]
    assert any(q != q.strip() for q in unique)  # the sample does hold questions with stray whitespace


def test_streaming_replays_the_same_answer() -> None:
    row = load_sample(limit=1)[0]
    chain = build_rag_chain(*replay_parts([row]))
    assert "".join(chain.stream(row["query"])) == row["actual_output"]


def test_unknown_question_and_hand_built_mapping() -> None:
    from langchain_core.messages import HumanMessage

    model = ReplayChatModel(answers={"  What is\nPython? ": "A language."})
    assert model.invoke([HumanMessage("Context: x\n\nQuestion: What is Python?")]).content == "A language."
    assert model.invoke([HumanMessage("Question: something else")]).content == model.default_answer
    assert model.invoke([HumanMessage("no marker")]).content == model.default_answer
