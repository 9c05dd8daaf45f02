"""Per-sentence relevance rows of the semantic judge: the query against each chunk sentence.

RAGBench labels which *sentences* of a chunk are relevant to the query; a sentence model trained on those
labels (``benchmarks/train_semantic.py --sentence-model``) scores every chunk sentence, and the chunk's
relevance row gets the best sentence's score, the mean of the two best and their sum, ranked within the
interaction (:data:`SENTENCE_STACK_FEATURES`).

:func:`sentence_rows` gives one row of :data:`SENTENCE_FEATURES` per chunk sentence, from the query, the
chunks' sentences (as :func:`~ctxutil_otel.judges._semantic_features.semantic_features` splits them) and
their unit vectors: the query's cosine with the sentence, with the sentence's chunk and with its
neighbours, the weighted share of the query's words in the sentence (global word weights and weights
within the interaction), its share of the query's bigrams, ranks, gaps and z-scores among all the
interaction's sentences, and the sentence's length and position. No feature depends on the order of the
chunks.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._learned_features import WordWeights
from ._text import tokens

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["SENTENCE_FEATURES", "SENTENCE_STACK_FEATURES", "sentence_rows", "stack_columns"]

SENTENCE_FEATURES: tuple[str, ...] = (
    "cos_q",
    "cos_q_rank",
    "cos_q_gap",
    "cos_q_z",
    "cover_global",
    "cover_global_rank",
    "cover_global_gap",
    "cover_local",
    "cover_local_gap",
    "bigram",
    "matched",
    "len_log",
    "position",
    "chunk_sentences",
    "cos_chunk",
    "cos_q_chunk",
    "cos_q_neighbour",
    "n_sentences",
    "query_len_log",
)
"""The sentence model's row, in order."""
SENTENCE_STACK_FEATURES: tuple[str, ...] = (
    "sent_p_max",
    "sent_p_top2",
    "sent_p_sum",
    "sent_p_max_rank",
    "sent_p_max_gap",
)
"""What the chunk's relevance row gets from its sentences' scores."""


def _ranked(values: Sequence[float]) -> tuple[list[float], list[float], list[float]]:
    best = max(values)
    ordered = sorted(values, reverse=True)
    first: dict[float, int] = {}
    for position, v in enumerate(ordered):
        first.setdefault(v, position)
    n = len(values)
    mean = sum(values) / n
    spread = (sum((v - mean) ** 2 for v in values) / n) ** 0.5
    return (
        [float(first[v]) for v in values],
        [best - v for v in values],
        [(v - mean) / (spread + 0.05) for v in values],
    )


def _bigrams(keys: list[str]) -> set[tuple[str, str]]:
    return set(zip(keys, keys[1:], strict=False))


def sentence_rows(
    query: str,
    chunk_parts: Sequence[Sequence[str]],
    q: npt.NDArray[np.float32],
    sentence_vectors: npt.NDArray[np.float32],
    chunk_vectors: npt.NDArray[np.float32],
    weights: WordWeights,
) -> list[list[list[float]]]:
    """Per chunk, one :data:`SENTENCE_FEATURES` row per sentence (``chunk_parts[i]``, whose unit vectors
    are the next ``len(chunk_parts[i])`` rows of ``sentence_vectors``; ``q`` the query's unit vector)."""
    q_keys = tokens(query)
    q_terms = set(q_keys)
    q_bi = _bigrams(q_keys)
    q_weight = math.fsum(weights[t] for t in q_terms)
    sent_keys = [[tokens(s) for s in parts] for parts in chunk_parts]
    flat_terms = [set(k) for keys in sent_keys for k in keys]
    total = len(flat_terms)
    df = {t: sum(1 for s in flat_terms if t in s) for t in q_terms}
    local = {t: math.log(1.0 + (total + 1) / (df[t] + 1)) for t in q_terms}
    local_total = math.fsum(local.values())
    cos_q = [float(x) for x in sentence_vectors @ q]
    cover_g = [
        math.fsum(weights[t] for t in q_terms & s) / q_weight if q_weight else 0.0 for s in flat_terms
    ]
    cover_l = [math.fsum(local[t] for t in q_terms & s) / local_total if local_total else 0.0 for s in flat_terms]
    cos_rank, cos_gap, cos_z = _ranked(cos_q)
    g_rank, g_gap, _ = _ranked(cover_g)
    _, l_gap, _ = _ranked(cover_l)
    q_len = math.log1p(len(q_keys))
    out: list[list[list[float]]] = []
    at = 0
    for i, keys in enumerate(sent_keys):
        n = len(keys)
        chunk = chunk_vectors[i]
        s_vecs = sentence_vectors[at : at + n]
        to_chunk = [float(x) for x in s_vecs @ chunk]
        q_chunk = float(chunk @ q)
        rows = []
        for j, k in enumerate(keys):
            f = at + j
            neighbours = [cos_q[f + d] for d in (-1, 1) if 0 <= j + d < n]
            rows.append(
                [
                    cos_q[f],
                    cos_rank[f],
                    cos_gap[f],
                    cos_z[f],
                    cover_g[f],
                    g_rank[f],
                    g_gap[f],
                    cover_l[f],
                    l_gap[f],
                    len(q_bi & _bigrams(k)) / len(q_bi) if q_bi else 0.0,
                    float(len(q_terms & flat_terms[f])),
                    math.log1p(len(k)),
                    float(min(j, 8)),
                    float(n),
                    to_chunk[j],
                    q_chunk,
                    max(neighbours) if neighbours else -1.0,
                    float(total),
                    q_len,
                ]
            )
        out.append(rows)
        at += n
    return out


def stack_columns(p_sentences: Sequence[Sequence[float]]) -> list[list[float]]:
    """Per chunk, the :data:`SENTENCE_STACK_FEATURES` from its sentences' P(relevant)."""
    best = [max(p) if p else 0.0 for p in p_sentences]
    top2 = [sum(sorted(p, reverse=True)[:2]) / min(2, len(p)) if p else 0.0 for p in p_sentences]
    total = [math.fsum(p) for p in p_sentences]
    rank, gap, _ = _ranked(best)
    return [[best[i], top2[i], total[i], rank[i], gap[i]] for i in range(len(p_sentences))]
