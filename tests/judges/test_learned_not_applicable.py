"""LearnedJudge: nothing relevant retrieved means not applicable, never a fake 0.0 (DESIGN.md's metric)."""

from __future__ import annotations

import pytest

from ctxutil_otel import ContextualUtilization, DatasetItem
from ctxutil_otel.judges import LearnedJudge

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
