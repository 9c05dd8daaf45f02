"""LearnedJudge features against answers that carry nothing from the chunks: an answer that only repeats
the query (the echo training copies and the ``a_new_share`` feature), and the sentence-level features'
one-pass tokenising (:func:`~ctxutil_otel.judges._text.sentence_words`)."""

from __future__ import annotations

import pytest

from ctxutil_otel.data import load_sample
from ctxutil_otel.judges import ChunkVerdict, LearnedJudge
from ctxutil_otel.judges._learned import draws_on_nothing
from ctxutil_otel.judges._learned_features import FEATURE_NAMES, WordWeights, chunk_features
from ctxutil_otel.judges._text import sentence_words, sentences, words

from .test_offline_judges import CHUNKS, QUERY

# Bundled-sample rows (250) that may still pass (score >= 0.5, the metric's default threshold) with the
# answer replaced by the row's query. The models alone let 246 (243 retrained) pass: training with the echo
# copies (train_learned.py --echo --row-echo) fixes that out of fold but costs ~0.015 score RMSE on natural
# rows, so the judge says it by rule instead (draws_on_nothing: a repeated query uses nothing).
MAX_ECHO_PASS_SHARE = 0.10


def _score(verdicts: list[ChunkVerdict]) -> float | None:
    relevant = [v for v in verdicts if v.is_relevant]
    return sum(v.is_utilized for v in relevant) / len(relevant) if relevant else None


def test_an_answer_that_only_repeats_the_query_does_not_pass_on_the_bundled_sample() -> None:
    # Failed before draws_on_nothing (246 of 250 sample rows passed, 243 with the retrained model).
    judge = LearnedJudge()
    rows = load_sample()
    passed = scored = 0
    for row in rows:
        score = _score(judge.judge_sync(row["query"], row["query"], row["retrieved_content"], reasons=False))
        if score is not None:
            scored += 1
            passed += score >= 0.5
    assert scored >= 0.9 * len(rows)  # relevance does not follow the answer: still judged, and failed
    assert passed / len(rows) <= MAX_ECHO_PASS_SHARE, passed


def test_a_repeated_query_uses_nothing_and_the_reason_says_so() -> None:
    query = "Which compounds in green tea fight inflammation?"
    repeated = "which compounds in Green Tea fight inflammation"  # case and punctuation aside
    verdicts = LearnedJudge().judge_sync(query, repeated, CHUNKS)
    relevant = [v for v in verdicts if v.is_relevant]
    assert relevant and not any(v.is_utilized for v in verdicts)
    for v in relevant:  # the reason names the rule, not an expected count the verdicts do not follow
        assert "the answer only repeats the query, so it draws on no chunk" in v.reason
        assert "expected used" not in v.reason


@pytest.mark.parametrize(
    ("query", "answer"),
    [
        ("Is green tea rich in antioxidants?", "Yes, green tea is rich in antioxidants."),  # adds "yes"
        ("Is green tea rich in antioxidants?", "Green tea is rich in antioxidants."),  # an assertion
        # a pick between what the query offers:
        ("Which is rich in antioxidants, green tea or coffee?", "Green tea is rich in antioxidants."),
    ],
)
def test_an_answer_made_of_the_querys_words_that_decides_something_is_left_to_the_models(
    query: str, answer: str
) -> None:
    assert draws_on_nothing(query, answer) == ""  # RAGBench labels such answers as using their chunk
    assert draws_on_nothing(query, query) == "the answer only repeats the query"
    assert draws_on_nothing(query, " ?! ") == "the answer has no words"


def test_the_answers_share_of_words_beyond_the_query_is_a_feature() -> None:
    at = FEATURE_NAMES.index("a_new_share")
    weights = WordWeights()  # every word as rare as it gets: the share does not need the model
    echoed, _ = chunk_features(QUERY, QUERY, CHUNKS, weights)
    answered, _ = chunk_features(QUERY, "Catechins in green tea fight inflammation.", CHUNKS, weights)
    assert {row[at] for row in echoed} == {0.0}
    assert {row[at] for row in answered} == {0.6}  # catechin, fight, inflammation of 5 content words


@pytest.mark.parametrize(
    "text",
    [
        "First one. Second one!\nThird, with 9.8 and 1,000 in it? e.g. this",
        "No end",
        "",
        " . . \n\n ",
        "Ends with a dot.",
        "Café au lait. Ünïcode words. 緑茶は健康に良い。 次の文。",
        "A.B. C.\tD",
    ],
)
def test_sentence_words_are_the_words_of_each_sentence(text: str) -> None:
    got = sentence_words(text)
    assert got == [keys for keys in map(words, sentences(text)) if keys]
    assert [k for keys in got for k in keys] == words(text)
