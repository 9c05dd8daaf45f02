"""Per-chunk features of the semantic judge: the learned judge's lexical features plus embedding cosines.

:func:`semantic_features` turns one interaction into two rows per chunk:

* a **relevance row** (:data:`RELEVANCE_FEATURES`) that never reads the answer: the learned judge's
  query-side lexical features (:data:`RELEVANCE_LEXICAL`, columns of
  :func:`~ctxutil_otel.judges._learned_features.chunk_features` computed from the query and the chunks
  only) and the cosines of the query with the chunk and with its best sentences, each with its rank, its
  gap to the best chunk and its z-score within the interaction (what generalises across domains is how a
  chunk compares with its neighbours, not an absolute similarity level), and the chunk's cosine with the
  chunk most like the query and its mean cosine with the other chunks;
* a **utilization row** (:data:`UTILIZATION_FEATURES`): every lexical feature, the relevance row's
  semantic values, and the answer's cosines with the chunk: whole texts, the best (answer sentence,
  chunk sentence) pair, the mean over answer sentences of their best chunk sentence, the share of answer
  sentences whose best source sentence is in this chunk, with ranks and gaps; and the answer's cosine
  with the query.

Vectors are :class:`~ctxutil_otel.judges._semantic_embed.StaticEmbedder` unit vectors (one numpy call per
interaction). Chunks are split into sentences with :func:`~ctxutil_otel.judges._text.sentences`, at most
:data:`MAX_SENTENCES` per chunk and per answer (the first ones). No feature depends on the order of the
chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._learned_features import FEATURE_NAMES, ChunkEvidence, WordWeights, chunk_features
from ._text import sentences

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ._semantic_embed import StaticEmbedder

__all__ = [
    "MAX_SENTENCES",
    "RELEVANCE_FEATURES",
    "RELEVANCE_LEXICAL",
    "UTILIZATION_FEATURES",
    "SemanticRows",
    "semantic_features",
]

MAX_SENTENCES = 24
_SMALL = 256  # up to this many chunks, _chunk_to_chunk builds the chunk-by-chunk matrix (the trained form)
_BLOCK = 4096  # rows of chunk vectors per float64 step in _mean_with_others
RELEVANCE_LEXICAL: tuple[str, ...] = (
    "q_cover_global",
    "q_cover_local",
    "q_bm25",
    "q_bigram",
    "chunk_len_log",
    "chunk_len_rel",
    "s_q_cover",
    "q_cover_global_rank",
    "q_bm25_rank",
    "q_cover_local_rank",
    "s_q_cover_rank",
    "q_cover_global_gap",
    "q_bm25_gap",
    "q_cover_local_gap",
    "s_q_cover_gap",
    "n_chunks",
    "query_len_log",
    "best_q_cover_any",
)
"""The learned judge's features that read only the query and the chunks (none reads the answer)."""
_Q_VALUES = ("sem_q_chunk", "sem_q_sent", "sem_q_top2")
_Q_RANKED = ("sem_q_chunk", "sem_q_sent")
_A_VALUES = ("sem_a_chunk", "sem_a_sent", "sem_a_cover", "sem_a_best_src")
_A_RANKED = ("sem_a_chunk", "sem_a_sent", "sem_a_cover")
RELEVANCE_SEMANTIC: tuple[str, ...] = (
    _Q_VALUES
    + tuple(f"{n}_rank" for n in _Q_RANKED)
    + tuple(f"{n}_gap" for n in _Q_RANKED)
    + tuple(f"{n}_z" for n in _Q_RANKED)
    + ("sem_q_best_any", "sem_q_mean_any", "sem_c_top", "sem_c_mean")
)
USE_SEMANTIC: tuple[str, ...] = (
    _A_VALUES
    + tuple(f"{n}_rank" for n in _A_RANKED)
    + tuple(f"{n}_gap" for n in _A_RANKED)
    + tuple(f"{n}_z" for n in _A_RANKED)
    + ("sem_a_query", "sem_a_best_any")
)
RELEVANCE_FEATURES: tuple[str, ...] = RELEVANCE_LEXICAL + RELEVANCE_SEMANTIC
"""The relevance model's row, in order (query and chunks only)."""
UTILIZATION_FEATURES: tuple[str, ...] = FEATURE_NAMES + RELEVANCE_SEMANTIC + USE_SEMANTIC
"""The utilization model's row, in order."""
_LEXICAL_AT = [FEATURE_NAMES.index(n) for n in RELEVANCE_LEXICAL]


class SemanticRows:
    """One interaction's rows: ``relevance[i]`` and ``utilization[i]`` for chunk ``i``, the learned judge's
    :class:`ChunkEvidence` per chunk, and the query's and answer's best cosine per chunk (for reasons)."""

    __slots__ = ("answer_cos", "evidence", "query_cos", "relevance", "utilization")

    def __init__(
        self,
        relevance: list[list[float]],
        utilization: list[list[float]],
        evidence: list[ChunkEvidence],
        query_cos: list[float],
        answer_cos: list[float],
    ) -> None:
        self.relevance = relevance
        self.utilization = utilization
        self.evidence = evidence
        self.query_cos = query_cos
        self.answer_cos = answer_cos


def _ranked(values: Sequence[float]) -> tuple[list[float], list[float], list[float]]:
    """Per value: rank (0 = best, ties share it), gap to the best, z-score within the interaction."""
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


def _split(text: str) -> list[str]:
    parts = [p for p in sentences(text) if p.strip()][:MAX_SENTENCES]
    return parts or [text]


def _sentence_cosines(
    sentence_vectors: npt.NDArray[np.float32],
    chunk_parts: list[list[str]],
    q: npt.NDArray[np.float32],
    av: npt.NDArray[np.float32],
    has_answer: bool,
) -> tuple[list[float], list[float], list[float], list[npt.NDArray[np.float32]]]:
    """Per chunk (its sentences' vectors in ``sentence_vectors``, in order): the query's best sentence
    cosine and its mean over the two best, the best (answer sentence, chunk sentence) cosine, and the
    best chunk-sentence cosine per answer sentence."""
    import numpy as np

    q_sent: list[float] = []
    q_top2: list[float] = []
    a_sent: list[float] = []
    per_answer: list[npt.NDArray[np.float32]] = []  # per chunk: best sentence cosine per answer sentence
    at = 0
    for parts in chunk_parts:
        s = sentence_vectors[at : at + len(parts)]
        at += len(parts)
        sims = np.sort(s @ q)[::-1]
        q_sent.append(float(sims[0]))
        q_top2.append(float(sims[: min(2, len(sims))].mean()))
        if has_answer:
            pair = av @ s.T  # (answer sentences, chunk sentences)
            best = pair.max(axis=1)
            per_answer.append(best)
            a_sent.append(float(best.max()))
        else:
            per_answer.append(np.zeros(0, dtype=np.float32))
            a_sent.append(0.0)
    return q_sent, q_top2, a_sent, per_answer


def _answer_coverage(
    per_answer: list[npt.NDArray[np.float32]], answer_sentences: int, n: int
) -> tuple[list[float], list[float]]:
    """Per chunk: the mean over answer sentences of their best sentence in the chunk, and the share of
    answer sentences whose best source sentence is in this chunk (zeros without an answer)."""
    import numpy as np

    if not answer_sentences:
        return [0.0] * n, [0.0] * n
    stacked = np.stack(per_answer)  # (chunks, answer sentences)
    a_cover = [float(x) for x in stacked.mean(axis=1)]
    winners = stacked.argmax(axis=0)
    a_src = [float((winners == i).sum()) / answer_sentences for i in range(n)]
    return a_cover, a_src


def _chunk_to_chunk(
    c: npt.NDArray[np.float32], q_chunk: list[float], chunks: Sequence[str]
) -> tuple[list[float], list[float]]:
    """Each chunk's cosine with the chunk most like the query (with the next one, for that chunk itself),
    and its mean cosine with the other chunks: what the chunks retrieved together share.

    Up to :data:`_SMALL` chunks from the chunk-by-chunk matrix (at most 256 KB), the computation the shipped
    model was trained on, bit for bit: one of its trees splits within 1e-7 of a value on the bundled sample.
    Above that, linear in the chunk count (same values within float32 rounding): the chunk's cosines with
    the top chunk, and a row's sum of cosines as its dot product with the sum of the vectors less its own."""
    n = len(chunks)
    if n < 2:
        return [1.0] * n, [1.0] * n
    by_query = sorted(range(n), key=lambda i: (-q_chunk[i], chunks[i]))
    top, second = by_query[0], by_query[1]
    if n <= _SMALL:
        cc = c @ c.T
        c_top = [float(cc[i, top if i != top else second]) for i in range(n)]
        return c_top, [float((cc[i].sum() - cc[i, i]) / (n - 1)) for i in range(n)]
    with_top = c @ c[top]
    with_top[top] = c[top] @ c[second]
    return [float(x) for x in with_top], _mean_with_others(c)


def _mean_with_others(c: npt.NDArray[np.float32]) -> list[float]:
    """Each row's mean cosine with the other rows in O(rows x dim): float64 sums, :data:`_BLOCK` rows
    at a time."""
    import numpy as np

    n = len(c)
    total = c.sum(axis=0, dtype=np.float64)
    out: list[float] = []
    for start in range(0, n, _BLOCK):
        rows = c[start : start + _BLOCK].astype(np.float64)
        others = rows @ total - np.einsum("ij,ij->i", rows, rows)
        out.extend(float(x) / (n - 1) for x in others)
    return out


def _columns(values: list[list[float]], ranked: list[list[float]]) -> list[list[float]]:
    """The value columns, then the ranks, the gaps and the z-scores of the ``ranked`` ones."""
    extra = [_ranked(r) for r in ranked]
    return values + [e[0] for e in extra] + [e[1] for e in extra] + [e[2] for e in extra]


def semantic_features(
    query: str,
    answer: str,
    chunks: Sequence[str],
    weights: WordWeights,
    embedder: StaticEmbedder,
    *,
    reasons: bool = False,
) -> SemanticRows:
    """The rows of one interaction (module docstring); ``reasons`` fills the evidence's top terms."""
    lexical, evidence = chunk_features(query, answer, chunks, weights, evidence=True, reasons=reasons)
    chunk_parts = [_split(c) for c in chunks]
    answer_parts = _split(answer) if answer.strip() else []
    texts = [query, answer, *chunks, *answer_parts]
    for parts in chunk_parts:
        texts.extend(parts)
    v = embedder.embed(texts)
    n = len(chunks)
    q, a = v[0], v[1]
    c = v[2 : 2 + n]
    av: npt.NDArray[np.float32] = v[2 + n : 2 + n + len(answer_parts)]
    q_chunk = [float(x) for x in c @ q]
    a_chunk = [float(x) for x in c @ a] if answer_parts else [0.0] * n
    q_sent, q_top2, a_sent, per_answer = _sentence_cosines(
        v[2 + n + len(answer_parts) :], chunk_parts, q, av, bool(answer_parts)
    )
    a_cover, a_src = _answer_coverage(per_answer, len(answer_parts), n)
    q_columns = _columns([q_chunk, q_sent, q_top2], [q_chunk, q_sent])
    a_columns = _columns([a_chunk, a_sent, a_cover, a_src], [a_chunk, a_sent, a_cover])
    q_any = [max(q_sent), sum(q_chunk) / n]
    c_top, c_mean = _chunk_to_chunk(c, q_chunk, chunks)
    a_any = [float(a @ q) if answer_parts else 0.0, max(a_sent)]
    relevance: list[list[float]] = []
    utilization: list[list[float]] = []
    for i in range(n):
        q_row = [col[i] for col in q_columns] + q_any + [c_top[i], c_mean[i]]
        a_row = [col[i] for col in a_columns] + a_any
        relevance.append([lexical[i][k] for k in _LEXICAL_AT] + q_row)
        utilization.append(lexical[i] + q_row + a_row)
    return SemanticRows(relevance, utilization, evidence, q_sent, a_sent)
