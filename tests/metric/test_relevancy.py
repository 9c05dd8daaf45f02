"""The retrieval half (issue 12 item 3): contextual relevancy from the same verdicts, no extra judge call.

relevancy = relevant distinct chunks / distinct chunks. Good retrieval with low utilization is a
generation problem; low relevancy is a retrieval problem.
"""

from __future__ import annotations

import pytest

from ctxutil_otel import ContextualUtilization, DatasetItem
from ctxutil_otel.judges import JudgeError

from .conftest import ScriptedJudge


def item(chunks: list[str]) -> DatasetItem:
    return DatasetItem(query="q?", actual_output="an answer", retrieved_content=chunks)


@pytest.mark.parametrize(
    ("script", "chunks", "relevancy", "utilization"),
    [
        ({"a": "RU", "b": "RU", "c": "R"}, ["a", "b", "c", "d"], 3 / 4, 2 / 3),  # green tea, DESIGN.md
        ({"a": "RU", "b": "RU", "c": "RU"}, ["a", "b", "c"], 1.0, 1.0),  # what is Python
        ({"a": "RU"}, ["a", "b", "c", "d"], 1 / 4, 1.0),  # retrieval problem: mostly irrelevant
        ({"a": "R", "b": "R"}, ["a", "b"], 1.0, 0.0),  # generation problem: relevant, ignored
        ({}, ["a", "b"], 0.0, None),  # nothing relevant: utilization n/a, relevancy 0
        ({"a": "RU"}, ["a", " a ", "b"], 1 / 2, 1.0),  # duplicates judged and counted once
    ],
)
async def test_relevancy_from_the_same_verdicts(
    script: dict[str, str], chunks: list[str], relevancy: float, utilization: float | None
) -> None:
    judge = ScriptedJudge(script)
    result = await ContextualUtilization(judge=judge).execute(item(chunks))
    assert result.signals.relevancy_score == pytest.approx(relevancy)
    assert result.signals.utilization_score == (None if utilization is None else pytest.approx(utilization))
    assert result.signals.distinct_chunks == len({c.strip() for c in chunks})
    assert len(judge.calls) == 1  # no extra judge call


async def test_no_relevancy_without_chunks_or_on_error() -> None:
    empty = await ContextualUtilization(judge=ScriptedJudge()).execute(item([]))
    assert empty.signals.relevancy_score is None

    class Failing(ScriptedJudge):
        async def judge(self, *args: object, **kwargs: object):  # type: ignore[no-untyped-def, override]
            raise JudgeError("boom")

    failed = await ContextualUtilization(judge=Failing()).execute(item(["a"]))
    assert failed.label == "error" and failed.signals.relevancy_score is None
