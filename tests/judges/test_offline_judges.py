"""What every offline judge does alike: the same verdicts with and without reasons, nothing utilized by an
empty answer, no verdicts without chunks. (The judge-specific behaviour is in test_learned_judge.py and
test_lexical_judge.py, which import QUERY, ANSWER and CHUNKS from here.)"""

from __future__ import annotations

import pytest

from ctxutil_otel.judges import Judge, LearnedJudge, LexicalJudge

QUERY = "What are the health benefits of green tea?"
ANSWER = (
    "Green tea contains catechins, antioxidants that reduce inflammation. "
    "It may also boost metabolism slightly."
)
CHUNKS = [
    "Green tea contains catechins, antioxidants that reduce inflammation in the body.",
    "Studies suggest green tea may boost metabolism slightly in some adults.",
    "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.",
    "Green tea is a popular drink; its health benefits include better focus, according to some.",
]

OFFLINE = pytest.mark.parametrize("make", [LearnedJudge, LexicalJudge], ids=["learned", "lexical"])


@OFFLINE
async def test_reasons_false_gives_empty_reasons_and_the_same_verdicts(make: type[Judge]) -> None:
    with_reasons = await make().judge(QUERY, ANSWER, CHUNKS)
    assert all(v.reason for v in with_reasons.verdicts)
    without = await make().judge(QUERY, ANSWER, CHUNKS, reasons=False)
    assert all(v.reason == "" for v in without.verdicts)
    assert [(v.is_relevant, v.is_utilized) for v in without.verdicts] == [
        (v.is_relevant, v.is_utilized) for v in with_reasons.verdicts
    ]


@OFFLINE
async def test_empty_answer_uses_nothing_and_no_chunks_gives_no_verdicts(make: type[Judge]) -> None:
    judge = make()
    empty = await judge.judge(QUERY, "", CHUNKS)
    assert not any(v.is_utilized for v in empty.verdicts)
    assert (await judge.judge(QUERY, ANSWER, [])).verdicts == []
