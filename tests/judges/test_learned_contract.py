"""LearnedJudge and DESIGN.md's metric contract: nothing relevant -> not applicable (never a fake 0.0); the
retrieved order and irrelevant chunks change no verdict."""

from __future__ import annotations

import re
from typing import Any

import pytest

from ctxutil_otel import ContextualUtilization, DatasetItem
from ctxutil_otel.data import load_sample
from ctxutil_otel.judges import ChunkVerdict, LearnedJudge
from ctxutil_otel.judges._learned_decision import decide, decide_relevant, decide_utilized

from .test_offline_judges import ANSWER, CHUNKS, QUERY

# The shipped model on the bundled sample (250 rows; docs/judges.md gives the out-of-fold and dev figures).
# Scored rows whose score moves with 1 / 3 off-topic chunks appended: 13 and 19 of 249 (model format 4;
# format 3 with its row model: 13 and 31; format 1, whose row model read the chunk count: 16 and 26; the
# model before the off-topic training copies: 65 and more). This sample comes from dev and chose nothing.
MAX_CHANGED_SHARE = {1: 0.06, 3: 0.13}
# Rows given another row's chunks that are called not applicable: 248 of 250 (before the off-topic copies: 4).
MIN_NOT_APPLICABLE_SHARE = 0.95
# Rows given another row's answer (their chunks still relevant) that are called not applicable: 14 of 250
# with --perturb swap's pairing (with the fallback chosen without the swapped copies: 100 of 250).
MAX_SWAPPED_NOT_APPLICABLE_SHARE = 0.10
# Scored rows called not applicable when the answer is empty: 10 of 249 with nothing_fallback 0.30 (chosen
# out of fold on the empty-answer copies), 12 of 249 before it (the general fallback, the answer's features).
MAX_EMPTY_NOT_APPLICABLE_SHARE = 0.045


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
        # the same text wins wherever it stands: the upper-case one sorts first
        assert [t for t, r in zip(order, relevant, strict=True) if r] == [texts[1]]
        assert [t for t, u in zip(order, utilized, strict=True) if u] == [texts[1]]


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
    threshold = judge.learned_model.decision.relevance_threshold
    query = "What are the health benefits of green tea?"
    echo = "Green tea has health benefits."  # no word beyond the query's
    chunks = ["Green tea has health benefits for many people.", "The stock market fell sharply on Tuesday."]
    verdicts = judge.judge_sync(query, echo, chunks)
    assert "none of it from answer words beyond the query's" in verdicts[0].reason
    probs = judge.probabilities(query, echo, chunks)
    for p, v in zip(probs.relevant, verdicts, strict=True):
        if v.is_relevant and p < threshold:
            assert "fallback" in v.reason


def _score(verdicts: list[ChunkVerdict]) -> float | None:
    relevant = [v for v in verdicts if v.is_relevant]
    return sum(v.is_utilized for v in relevant) / len(relevant) if relevant else None


def _offtopic(rows: list[dict[str, Any]], i: int, k: int) -> list[str]:
    """``k`` chunks of the rows after row ``i`` (each from another row, none among row ``i``'s own)."""
    own = set(rows[i]["retrieved_content"])
    out: list[str] = []
    for step in range(1, len(rows)):
        chunk = rows[(i + 7 * step) % len(rows)]["retrieved_content"][0]
        if chunk not in own and chunk not in out:
            out.append(chunk)
        if len(out) == k:
            break
    return out


def test_off_topic_chunks_appended_rarely_change_the_score_on_the_bundled_sample() -> None:
    judge = LearnedJudge()
    rows = load_sample()
    changed = {1: 0, 3: 0}
    scored = 0
    for i, row in enumerate(rows):
        before = _score(
            judge.judge_sync(row["query"], row["actual_output"], row["retrieved_content"], reasons=False)
        )
        if before is None:
            continue
        scored += 1
        for k in changed:
            chunks = [*row["retrieved_content"], *_offtopic(rows, i, k)]
            after = _score(judge.judge_sync(row["query"], row["actual_output"], chunks, reasons=False))
            changed[k] += after != before
    assert scored > 200
    assert changed[1] / scored <= MAX_CHANGED_SHARE[1], changed
    assert changed[3] / scored <= MAX_CHANGED_SHARE[3], changed


def test_chunks_below_the_relevance_threshold_move_no_verdict_whatever_their_p_used() -> None:
    # Model formats 1-3 set the utilized count from a row model that read the number of chunks, the mean
    # P(relevant) over all of them, then the share of all chunks that are some answer sentence's best
    # source: each appended chunk moved the estimate (the review: 4 unrelated sentences appended changed
    # 238 of 1,405 train scores, mean -0.038). The count is now the sum of P(used) over relevant chunks.
    judge = LearnedJudge()
    decision = judge.learned_model.decision
    p_rel, p_use = [0.95, 0.9, 0.05, 0.8], [0.9, 0.7, 0.1, 0.2]
    before = decide(decision, p_rel, p_use)
    low = decision.fallback_threshold / 2  # below the threshold and the fallback
    after = decide(decision, [*p_rel, low, 0.0], [*p_use, 0.99, 0.99])
    assert after.relevant[:4] == before.relevant and after.utilized[:4] == before.utilized
    assert after.expected == before.expected
    assert not any(after.relevant[4:])


def test_another_rows_chunks_are_mostly_not_applicable_on_the_bundled_sample() -> None:
    judge = LearnedJudge()
    rows = load_sample()
    not_applicable = 0
    for i, row in enumerate(rows):
        other = rows[(i + 7) % len(rows)]["retrieved_content"]
        verdicts = judge.judge_sync(row["query"], row["actual_output"], other, reasons=False)
        not_applicable += not any(v.is_relevant for v in verdicts)
    assert not_applicable / len(rows) >= MIN_NOT_APPLICABLE_SHARE, not_applicable


async def test_an_answer_that_ignores_relevant_chunks_is_a_fail_not_not_applicable() -> None:
    # The fallback once chosen only against rows with nothing relevant (0.45) called this not applicable,
    # and 100 of the bundled sample's 250 rows with another row's answer: the low-utilization case the
    # product exists to alert on vanished from the score.
    metric = ContextualUtilization(judge=LearnedJudge())
    chunks = [
        "Green tea contains antioxidants called catechins.",
        "The antioxidants in green tea reduce inflammation.",
        "Tea originated in China thousands of years ago.",
    ]
    item = DatasetItem(
        query="What are the benefits of green tea?",
        actual_output="Drink water every day.",
        retrieved_content=chunks,
    )
    result = await metric.execute(item)
    assert (result.score, result.label) == (0.0, "fail")


def test_another_rows_answer_rarely_makes_a_row_not_applicable_on_the_bundled_sample() -> None:
    judge = LearnedJudge()
    rows = load_sample()
    not_applicable = 0
    for i, row in enumerate(rows):
        answer = rows[(i + 7) % len(rows)]["actual_output"]
        verdicts = judge.judge_sync(row["query"], answer, row["retrieved_content"], reasons=False)
        not_applicable += not any(v.is_relevant for v in verdicts)
    assert not_applicable / len(rows) <= MAX_SWAPPED_NOT_APPLICABLE_SHARE, not_applicable


def test_a_chunk_used_against_its_odds_says_it_makes_up_the_expected_count() -> None:
    # The count of used chunks is the expected one, rounded; a chunk the models find less likely used than
    # not (P(used) < 0.5) may complete it, and its reason must not read as plain evidence of use.
    # The other way round: a relevant chunk more likely used than not, left outside the rounded count,
    # says so (the reviewer read "P(used) 0.58; 4.2 of the 5 ... expected used" as a contradiction).
    judge = LearnedJudge()
    against = left_out = 0
    for row in load_sample():
        query, answer, chunks = row["query"], row["actual_output"], row["retrieved_content"]
        p_use = judge.probabilities(query, answer, chunks).utilized
        for v, p in zip(judge.judge_sync(query, answer, chunks), p_use, strict=True):
            assert re.search(r"P\(used\) [0-9.]+", v.reason), v.reason
            if v.is_utilized and p < 0.5:
                against += 1
                assert "counted to make up the" in v.reason and "expected used" in v.reason, v.reason
            if v.is_relevant and not v.is_utilized and p >= 0.5:
                left_out += 1
                assert re.search(r"expected used, rounded to \d+: more likely used", v.reason), v.reason
    assert against > 0 and left_out > 0  # the sample has both (33 left out with the shipped model)


def test_a_chunks_relevance_is_about_the_query_not_the_answer() -> None:
    # DESIGN.md, step 1: relevance to the *query*. Given another row's answer, a chunk the judge found
    # relevant should stay relevant (and become unused), or an ignored chunk would vanish from the
    # denominator instead of lowering the score. Before P(relevant) learned from the swapped-answer
    # copies, 357 of 780 stayed relevant on the bundled sample (0.46); 737 of 805 now.
    judge = LearnedJudge()
    rows = load_sample()
    kept = relevant = 0
    for k, row in enumerate(rows):
        other = rows[(k + 1) % len(rows)]["actual_output"]
        own = judge.judge_sync(row["query"], row["actual_output"], row["retrieved_content"], reasons=False)
        swapped = judge.judge_sync(row["query"], other, row["retrieved_content"], reasons=False)
        relevant += sum(v.is_relevant for v in own)
        kept += sum(a.is_relevant and b.is_relevant for a, b in zip(own, swapped, strict=True))
    assert kept / relevant >= 0.85, (kept, relevant)


def test_an_empty_answer_over_relevant_context_is_a_fail_not_not_applicable_on_the_bundled_sample() -> None:
    # DESIGN.md: "empty answer with relevant chunks: 0.0". Relevance evidence partly comes from the answer,
    # so with the answer "" 12 of the 249 scored sample rows had no relevant chunk (not applicable, which
    # would hide an application returning empty answers); relevance is now judged from the query alone
    # with a fallback chosen on empty-answer training copies (10 of 249). Another row's chunks stay not
    # applicable.
    judge = LearnedJudge()
    rows = load_sample()
    forms = ("", "  ", "?")
    scored = empty_na = 0
    offtopic_na = 0
    for i, row in enumerate(rows):
        own = judge.judge_sync(row["query"], row["actual_output"], row["retrieved_content"], reasons=False)
        if any(v.is_relevant for v in own):
            scored += 1
            for empty in forms:
                verdicts = judge.judge_sync(row["query"], empty, row["retrieved_content"], reasons=False)
                assert not any(v.is_utilized for v in verdicts)
                empty_na += not any(v.is_relevant for v in verdicts)
        other = rows[(i + 7) % len(rows)]["retrieved_content"]
        offtopic_na += not any(
            v.is_relevant for v in judge.judge_sync(row["query"], "", other, reasons=False)
        )
    assert scored > 200
    assert empty_na / (scored * len(forms)) <= MAX_EMPTY_NOT_APPLICABLE_SHARE, (empty_na, scored)
    assert offtopic_na / len(rows) >= MIN_NOT_APPLICABLE_SHARE, offtopic_na
