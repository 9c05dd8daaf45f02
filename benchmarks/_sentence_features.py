"""Features of the semantic judge's study variants (docs/judges-study.md, "Diagnosis, and variants aimed
at it"; none ships): per-sentence rows for sentence-level models and set-cover columns for the use model.

* :func:`sentence_rows`: one :data:`SENTENCE_FEATURES` row per chunk sentence for a (query, sentence)
  relevance model trained on RAGBench's sentence labels (``train_semantic.py --sentence-model``): the
  query's cosine with the sentence, with the sentence's chunk and with its neighbours, the weighted share of
  the query's words in the sentence (global word weights and weights within the interaction), its share of
  the query's bigrams, ranks, gaps and z-scores among all the interaction's sentences, the sentence's length
  and position; :func:`stack_columns` turns the sentences' scores into the chunk's
  :data:`SENTENCE_STACK_FEATURES`.
* :func:`use_sentence_rows`: the same for an (answer, sentence) use model (``--use-sentence-model``).
* :func:`cover_columns`: greedy set cover of the answer by the chunks (``--cover-features``).

Sentences and vectors are those of :func:`~ctxutil_otel.judges._semantic_features.semantic_features`
(the same split, the same embedder), so a variant that won could move here into the judge unchanged. No
feature depends on the order of the chunks.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ctxutil_otel.judges._learned_features import WordWeights
from ctxutil_otel.judges._semantic_features import _ranked
from ctxutil_otel.judges._text import tokens

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


def _bigrams(keys: list[str]) -> set[tuple[str, str]]:
    return set(itertools.pairwise(keys))


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
    cover_g = [math.fsum(weights[t] for t in q_terms & s) / q_weight if q_weight else 0.0 for s in flat_terms]
    cover_l = [
        math.fsum(local[t] for t in q_terms & s) / local_total if local_total else 0.0 for s in flat_terms
    ]
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


USE_SENTENCE_FEATURES: tuple[str, ...] = (
    "cos_a",
    "cos_a_rank",
    "cos_a_gap",
    "cos_a_z",
    "cos_a_margin",
    "best_source_share",
    "cos_answer",
    "in_answer",
    "a_new_share",
    "a_only_here",
    "trigram",
    "cos_q",
    "len_log",
    "position",
    "chunk_sentences",
    "answer_sentences",
)
"""The use sentence model's row, in order."""
USE_STACK_FEATURES: tuple[str, ...] = (
    "use_p_max",
    "use_p_top2",
    "use_p_sum",
    "use_p_max_rank",
    "use_p_max_gap",
)
"""What the chunk's utilization row gets from its sentences' scores."""


def _trigrams(keys: list[str]) -> set[tuple[str, str, str]]:
    return set(zip(keys, keys[1:], keys[2:], strict=False))


def use_sentence_rows(
    query: str,
    answer: str,
    chunk_parts: Sequence[Sequence[str]],
    q: npt.NDArray[np.float32],
    a: npt.NDArray[np.float32],
    answer_vectors: npt.NDArray[np.float32],
    sentence_vectors: npt.NDArray[np.float32],
    weights: WordWeights,
) -> list[list[list[float]]]:
    """Per chunk, one :data:`USE_SENTENCE_FEATURES` row per sentence: how well it explains the answer
    (``answer_vectors``: the answer sentences' unit vectors, ``a`` the whole answer's), against the other
    chunks' sentences: the best (answer sentence, this sentence) cosine, its margin over the best sentence
    of the other chunks for the same answer sentence, the share of answer sentences it is the best source
    of, and the answer's new words found here and in no other chunk."""
    import numpy as np

    q_terms = set(tokens(query))
    a_keys = tokens(answer)
    a_new = set(a_keys) - q_terms
    a_tri = _trigrams(a_keys)
    new_weight = math.fsum(weights[t] for t in a_new)
    sent_keys = [[tokens(s) for s in parts] for parts in chunk_parts]
    chunk_terms = [set().union(*map(set, keys)) if keys else set() for keys in sent_keys]
    owner = [i for i, keys in enumerate(sent_keys) for _ in keys]
    total = len(owner)
    m = len(answer_vectors)
    pair = sentence_vectors @ answer_vectors.T if m else np.zeros((total, 0), dtype=np.float32)
    cos_a = [float(x) for x in pair.max(axis=1)] if m else [0.0] * total
    rank, gap, z = _ranked(cos_a)
    winners = pair.argmax(axis=0) if m else np.zeros(0, dtype=np.int64)
    # per chunk, per answer sentence: the best cosine among the *other* chunks' sentences
    owner_arr = np.asarray(owner)
    n = len(sent_keys)
    chunk_best = np.full((n, m), -1.0, dtype=np.float32)
    for i in range(n):
        rows = pair[owner_arr == i]
        if len(rows):
            chunk_best[i] = rows.max(axis=0)
    cos_answer = [float(x) for x in sentence_vectors @ a]
    cos_q = [float(x) for x in sentence_vectors @ q]
    out: list[list[list[float]]] = []
    f = 0
    for i, keys in enumerate(sent_keys):
        others = np.delete(chunk_best, i, axis=0).max(axis=0) if n > 1 and m else np.full(m, -1.0)
        elsewhere = set().union(*(chunk_terms[j] for j in range(n) if j != i)) if n > 1 else set()
        rows = []
        for j, k in enumerate(keys):
            terms = set(k)
            found = a_new & terms
            margin = float((pair[f] - others).max()) if m else 0.0
            rows.append(
                [
                    cos_a[f],
                    rank[f],
                    gap[f],
                    z[f],
                    margin,
                    float((winners == f).sum()) / m if m else 0.0,
                    cos_answer[f],
                    len(terms & set(a_keys)) / (len(terms) + 1),
                    math.fsum(weights[t] for t in found) / new_weight if new_weight else 0.0,
                    math.fsum(weights[t] for t in found - elsewhere) / new_weight if new_weight else 0.0,
                    1.0 if a_tri & _trigrams(k) else 0.0,
                    cos_q[f],
                    math.log1p(len(k)),
                    float(min(j, 8)),
                    float(len(keys)),
                    float(m),
                ]
            )
            f += 1
        out.append(rows)
    return out


COVER_FEATURES: tuple[str, ...] = (
    "cover_lex_gain",
    "cover_lex_order",
    "cover_lex_loss",
    "cover_sem_gain",
    "cover_sem_order",
    "cover_sem_loss",
)
"""How much of the answer each chunk explains beyond the other chunks (:func:`cover_columns`)."""


def _greedy(gains: Callable[[set[int]], list[float]], n: int) -> tuple[list[float], list[float]]:
    """Greedy set cover: per chunk, its gain when picked (0 once nothing is left) and its pick order."""
    gain = [0.0] * n
    order = [float(n)] * n
    picked: set[int] = set()
    for step in range(n):
        now = gains(picked)
        best = max((i for i in range(n) if i not in picked), key=lambda i: (now[i], -i))
        if now[best] <= 1e-9:
            break
        gain[best] = now[best]
        order[best] = float(step)
        picked.add(best)
    return gain, order


def cover_columns(
    answer: str,
    query: str,
    chunk_parts: Sequence[Sequence[str]],
    per_answer: Sequence[npt.NDArray[np.float32]],
    weights: WordWeights,
) -> list[list[float]]:
    """Per chunk, the :data:`COVER_FEATURES`: greedy set cover of the answer by the chunks, with words
    (the answer's new content words, weighted) and with sentences (per answer sentence, its best cosine
    with a chunk sentence, ``per_answer[i]``); the chunk's gain when picked, its pick order, and what the
    answer loses without it (the words no other chunk has, the cosine the other chunks fall short by)."""
    import numpy as np

    n = len(chunk_parts)
    a_new = set(tokens(answer)) - set(tokens(query))
    total = math.fsum(weights[t] for t in a_new)
    if not n:
        return []
    has = [a_new & set().union(*(set(tokens(s)) for s in parts)) for parts in chunk_parts]

    def lex(picked: set[int]) -> list[float]:
        done = set().union(*(has[j] for j in picked)) if picked else set()
        return [math.fsum(weights[t] for t in has[i] - done) / total if total else 0.0 for i in range(n)]

    lex_gain, lex_order = _greedy(lex, n)
    lex_loss = [
        math.fsum(weights[t] for t in has[i] - set().union(*(has[j] for j in range(n) if j != i))) / total
        if total
        else 0.0
        for i in range(n)
    ]
    m = len(per_answer[0]) if per_answer else 0
    if not m:
        return [[lex_gain[i], lex_order[i], lex_loss[i], 0.0, float(n), 0.0] for i in range(n)]
    cos = np.clip(np.stack(per_answer), 0.0, None)  # (chunks, answer sentences)

    def sem(picked: set[int]) -> list[float]:
        base = cos[sorted(picked)].max(axis=0) if picked else np.zeros(m, dtype=np.float32)
        return [float(np.maximum(cos[i] - base, 0.0).sum()) / m for i in range(n)]

    sem_gain, sem_order = _greedy(sem, n)
    sem_loss = []
    for i in range(n):
        others = np.delete(cos, i, axis=0).max(axis=0) if n > 1 else np.zeros(m, dtype=np.float32)
        sem_loss.append(float(np.maximum(cos[i] - others, 0.0).sum()) / m)
    return [
        [lex_gain[i], lex_order[i], lex_loss[i], sem_gain[i], sem_order[i], sem_loss[i]] for i in range(n)
    ]
