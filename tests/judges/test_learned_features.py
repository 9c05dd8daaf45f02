"""LearnedJudge features: the term counts behind BM25 come from one counting pass per chunk."""

from __future__ import annotations

import math

from ctxutil_otel.judges._learned_features import FEATURE_NAMES, chunk_features
from ctxutil_otel.judges._learned_model import shipped_model
from ctxutil_otel.judges._text import STOP_KEYS, content, words

from .test_offline_judges import ANSWER, CHUNKS, QUERY


def _bm25_by_list_count(query: str, chunks: list[str]) -> list[float]:
    """BM25 as first written: ``list.count`` per query word (quadratic, the reference values)."""
    weight = shipped_model().weights
    chunk_words = [words(c) for c in chunks]
    q_terms = content(words(query), STOP_KEYS)
    avg_len = sum(len(w) for w in chunk_words) / len(chunks) or 1.0
    out = []
    for cw in chunk_words:
        tf = {t: cw.count(t) for t in q_terms & set(cw)}
        norm = 1.2 * (0.25 + 0.75 * len(cw) / avg_len)
        out.append(math.fsum(weight[t] * tf[t] * 2.2 / (tf[t] + norm) for t in sorted(tf)))
    return out


def test_bm25_from_one_count_per_chunk_equals_the_per_word_count() -> None:
    long_query = " ".join([QUERY, *CHUNKS[:2]]) * 20  # many query words, many repeats in the chunks
    chunks = [*(c * 15 for c in CHUNKS), ""]
    rows, _ = chunk_features(long_query, ANSWER, chunks, shipped_model().weights)
    at = FEATURE_NAMES.index("q_bm25")
    assert [row[at] for row in rows] == _bm25_by_list_count(long_query, chunks)
    assert any(row[at] > 0 for row in rows)
