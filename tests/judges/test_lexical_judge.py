"""LexicalJudge: determinism, easy cases, scripts other than Latin, size limits, reasons on/off."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ctxutil_otel import ContextualUtilization, DatasetItem, EvaluationMode
from ctxutil_otel.judges import Judge, LexicalJudge
from ctxutil_otel.judges._text import sentences, stem, tokens, words

from .test_offline_judges import ANSWER, CHUNKS, QUERY


async def test_judge_is_deterministic_across_calls_and_instances() -> None:
    first = await LexicalJudge().judge(QUERY, ANSWER, CHUNKS)
    second = await LexicalJudge().judge(QUERY, ANSWER, CHUNKS)
    again = await LexicalJudge().judge(QUERY, ANSWER, list(reversed(CHUNKS)))
    assert first == second
    assert [v.index for v in first.verdicts] == [0, 1, 2, 3]
    # Order of chunks does not change a chunk's verdict (only its index).
    flipped = {CHUNKS[3 - v.index]: (v.is_relevant, v.is_utilized) for v in again.verdicts}
    assert flipped == {CHUNKS[v.index]: (v.is_relevant, v.is_utilized) for v in first.verdicts}


async def test_quoted_chunks_are_utilized_and_off_topic_chunk_is_not_relevant() -> None:
    result = await LexicalJudge().judge(QUERY, ANSWER, CHUNKS)
    verdicts = result.verdicts
    assert result.usage is None
    assert verdicts[0].is_relevant and verdicts[0].is_utilized
    assert verdicts[1].is_relevant and verdicts[1].is_utilized
    assert not verdicts[2].is_relevant and not verdicts[2].is_utilized
    # On topic (query words) but not used by the answer.
    assert verdicts[3].is_relevant and not verdicts[3].is_utilized


async def test_reasons_name_shared_terms() -> None:
    with_reasons = await LexicalJudge().judge(QUERY, ANSWER, CHUNKS)
    assert with_reasons.verdicts[0].reason.startswith("used: shares")
    assert "'catechin'" in with_reasons.verdicts[0].reason
    assert with_reasons.verdicts[2].reason.startswith("not relevant")


async def test_fallback_marks_best_on_topic_chunk_when_answer_shares_nothing() -> None:
    chunks = ["Green tea is grown in China and Japan.", "Stock markets fell on Tuesday."]
    query = "Where in Kenya is green tea grown commercially?"
    result = await LexicalJudge().judge(query, "I cannot say.", chunks)
    assert [(v.is_relevant, v.is_utilized) for v in result.verdicts] == [(True, False), (False, False)]
    assert "best on-topic chunk" in result.verdicts[0].reason
    no_fallback = await LexicalJudge(fallback=False).judge(query, "I cannot say.", chunks)
    assert not any(v.is_relevant for v in no_fallback.verdicts)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("東京都の人口", ["東京", "京都", "都の", "の人", "人口"]),  # Han/Kana runs -> character bigrams
        ("שלום עולם", ["שלום", "עולם"]),  # Hebrew (RTL) words kept
        ("مرحبا بالعالم", ["مرحبا", "بالعالم"]),  # Arabic (RTL) words kept
        ("green 🍵 tea 😀", ["green", "tea"]),  # emoji are not words
        ("Released 9.8% of 1,000 cases", ["releas", "9.8", "of", "1,000", "cas"]),
    ],
)
def test_words_tokenise_scripts_emoji_and_numbers(text: str, expected: list[str]) -> None:
    assert words(text) == expected


def test_stem_maps_inflections_together_and_tokens_drop_stopwords() -> None:
    assert stem("released") == stem("release") == stem("releases")
    assert stem("studies") == stem("study")
    assert stem("virus") == "virus"
    assert tokens("What is the capital of France?") == ["capital", "franc"]
    assert sentences("One. Two! Three?\nFour") == ["One.", "Two!", "Three?", "Four"]


async def test_emoji_cjk_and_rtl_text_is_judged_without_error() -> None:
    chunks = ["東京都の人口は約1400万人である。", "مرحبا بالعالم שלום עולם", "🍵🍵🍵", ""]
    result = await LexicalJudge().judge("東京の人口は？ 🍵", "東京都の人口は約1400万人です。", chunks)
    assert [v.index for v in result.verdicts] == [0, 1, 2, 3]
    assert result.verdicts[0].is_relevant and result.verdicts[0].is_utilized
    assert not result.verdicts[2].is_utilized and not result.verdicts[3].is_utilized


@pytest.mark.timeout(60)  # guards against a quadratic blow-up; not a speed measurement
async def test_ten_thousand_chunks_and_a_one_megabyte_chunk_finish() -> None:
    judge = LexicalJudge()
    many = [f"record {i} mentions topic{i % 101} and value {i * 7}" for i in range(10_000)]
    answer = "Record 42 mentions topic42 and value 294."
    result = await judge.judge("what does record 42 mention", answer, many, reasons=False)
    assert len(result.verdicts) == 10_000
    assert result.verdicts[42].is_utilized
    utilized = {v.index for v in result.verdicts if v.is_utilized}
    # Only chunks sharing the distinctive "topic42" (every 101st) or a number of the answer are used.
    assert utilized <= {i for i in range(10_000) if i % 101 == 42 or {"42", "294"} & set(many[i].split())}

    big = ("The quick brown fox jumps over the lazy dog near the river bank. " * 16_000)[:1_000_000]
    assert len(big) == 1_000_000
    result = await judge.judge(
        "what does the fox jump over", "The fox jumps over the lazy dog.", [big, "cars"]
    )
    assert result.verdicts[0].is_utilized and not result.verdicts[1].is_relevant

    # A very long answer (5,000 sentences) against 2,000 chunks: compared in at most 64 groups.
    long_answer = " ".join(f"Sentence {i} says fact{i} is {i * 3}." for i in range(5_000))
    result = await judge.judge("what are the facts", long_answer, many[:2_000], reasons=False)
    assert len(result.verdicts) == 2_000


async def test_lexical_judge_in_the_metric_and_fast_mode() -> None:
    judge = LexicalJudge()
    assert isinstance(judge, Judge)
    assert (judge.name, judge.model) == ("lexical", None)
    item = DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=CHUNKS)
    granular = await ContextualUtilization(judge=judge).execute(item)
    fast = await ContextualUtilization(judge=judge, mode=EvaluationMode.FAST).execute(item)
    assert granular.judge_name == "lexical"
    assert granular.score == fast.score == pytest.approx(2 / 3)
    assert all(c.reason for c in granular.signals.chunk_breakdown)
    assert all(c.reason == "" for c in fast.signals.chunk_breakdown)


def test_invalid_thresholds_are_rejected() -> None:
    with pytest.raises(ValueError, match="utilization_threshold"):
        LexicalJudge(utilization_threshold=1.5)
    with pytest.raises(ValueError, match="min_support"):
        LexicalJudge(min_support=-0.1)
    with pytest.raises(ValueError, match="term_weight"):
        LexicalJudge(term_weight=-1)


_VERDICTS_SCRIPT = """
import json
from ctxutil_otel.data import load_sample
from ctxutil_otel.judges import LexicalJudge
judge = LexicalJudge()
out = []
for row in load_sample(limit=60):
    verdicts = judge.judge_sync(row["query"], row["actual_output"], row["retrieved_content"])
    out.append([[v.is_relevant, v.is_utilized, v.reason] for v in verdicts])
print(json.dumps(out))
"""


def test_verdicts_do_not_depend_on_the_hash_seed() -> None:
    """Word sets iterate in a per-process order; the verdicts and reasons must not."""
    outputs = []
    for seed in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-c", _VERDICTS_SCRIPT],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        outputs.append(json.loads(proc.stdout))
    assert len(outputs[0]) == 60
    assert outputs[0] == outputs[1]


def test_only_the_first_max_text_chars_of_a_chunk_are_read() -> None:
    from ctxutil_otel.judges import LexicalJudge as _Judge

    tail = " Catechins in green tea are antioxidants that reduce inflammation."
    chunk = "lorem ipsum dolor sit amet " * 1_000 + tail  # the evidence sits past 27,000 characters
    answer = "Catechins in green tea are antioxidants that reduce inflammation."
    capped = _Judge().judge_sync("green tea", answer, [chunk, "catechins are antioxidants"])
    uncapped = _Judge(max_text_chars=100_000).judge_sync("green tea", answer, [chunk, "catechins"])
    assert capped[0].is_utilized is False
    assert uncapped[0].is_utilized is True
    with pytest.raises(ValueError, match="max_text_chars"):
        _Judge(max_text_chars=0)
