"""LearnedJudge and DESIGN.md's metric contract: nothing relevant -> not applicable (never a fake 0.0); the
retrieved order and irrelevant chunks change no verdict."""

from __future__ import annotations

import pytest

from ctxutil_otel import ContextualUtilization, DatasetItem
from ctxutil_otel.judges import LearnedJudge
from ctxutil_otel.judges._learned import decide_relevant, decide_utilized, follow_estimate

from .test_offline_judges import ANSWER, CHUNKS, QUERY


@pytest.mark.parametrize(
    "chunks",
    [["", ""], ["   ", "\n\t"], ["!!!", "---", "..."], [""]],
    ids=["empty", "whitespace", "punctuation", "one-empty"],
)
async def test_chunks_without_words_make_the_interaction_not_applicable(chunks: list[str]) -> None:
    metric = ContextualUtilization(judge=LearnedJudge())
    result = await metric.execute(DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=chunks))
    assert result.score is None
    assert result.label == "not_applicable"


async def test_a_chunk_without_words_is_never_relevant_and_moves_no_other_verdict() -> None:
    judge = LearnedJudge()
    plain = judge.judge_sync(QUERY, ANSWER, CHUNKS)
    padded = judge.judge_sync(QUERY, ANSWER, ["", *CHUNKS, " ... "])
    assert not padded[0].is_relevant and not padded[-1].is_relevant
    assert padded[0].reason == "not relevant: no words"
    assert [(v.is_relevant, v.is_utilized) for v in padded[1:-1]] == [
        (v.is_relevant, v.is_utilized) for v in plain
    ]
    assert [v.index for v in padded] == list(range(len(CHUNKS) + 2))


def test_equal_probabilities_are_broken_by_the_chunk_text_not_its_position() -> None:
    texts = ["Green tea is rich in catechins.", "GREEN TEA IS RICH IN CATECHINS."]  # same word keys
    for order in (texts, texts[::-1]):
        relevant = decide_relevant([0.3, 0.3], 0.5, 0.2, order)
        utilized = decide_utilized(0.5, [0.7, 0.7], [True, True], 0.5, order)
        kept = follow_estimate([0.55, 0.55], [True, True], 1.0, low=0.1, high=0.9, penalty=0.0, ties=order)
        # the same text wins wherever it stands: the upper-case one sorts first
        assert [t for t, r in zip(order, relevant, strict=True) if r] == [texts[1]]
        assert [t for t, u in zip(order, utilized, strict=True) if u] == [texts[1]]
        assert [t for t, k in zip(order, kept, strict=True) if k] == [texts[1]]


async def test_reasons_say_what_was_cut_at_max_text_chars() -> None:
    judge = LearnedJudge(max_text_chars=100)
    verdicts = judge.judge_sync(QUERY, ANSWER, [CHUNKS[0] + " filler" * 50, CHUNKS[2]])
    assert all(
        v.reason.endswith("[read only the first 100 characters of the answer, chunk 0]") for v in verdicts
    )
    whole = LearnedJudge().judge_sync(QUERY, ANSWER, CHUNKS)
    assert not any("read only" in v.reason for v in whole)


def test_reasons_name_the_fallback_and_support_that_only_repeats_the_query() -> None:
    judge = LearnedJudge()
    threshold = judge.learned_model.relevance_threshold
    query = "What are the health benefits of green tea?"
    echo = "Green tea has health benefits."  # no word beyond the query's
    chunks = ["Green tea has health benefits for many people.", "The stock market fell sharply on Tuesday."]
    verdicts = judge.judge_sync(query, echo, chunks)
    assert "none of it from answer words beyond the query's" in verdicts[0].reason
    probs = judge.probabilities(query, echo, chunks)
    for p, v in zip(probs.relevant, verdicts, strict=True):
        if v.is_relevant and p < threshold:
            assert "fallback" in v.reason or "follow the row estimate" in v.reason
