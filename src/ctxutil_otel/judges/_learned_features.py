"""Per-chunk features of the learned judge: cheap lexical evidence, ranked within the interaction.

:func:`chunk_features` turns one interaction (query, answer, chunks) into one row of
:data:`FEATURE_NAMES` floats per chunk. The same function builds the training rows
(``benchmarks/train_learned.py``) and the rows the shipped trees score at run time, so training and
inference cannot drift apart.

What the features measure (words are :func:`~ctxutil_otel.judges._text.words` keys, stopwords dropped):

* query side: weighted share of the query's words in the chunk, with a *global* weight (from the
  shipped word-frequency table: rare words count more) and with a weight *within the interaction*
  (``ln(1 + (N + 1) / (df + 1))`` over the N chunks); a BM25 score; the share of query bigrams;
* answer side: the weighted share of the answer's new words (not in the query) in the chunk; per answer
  sentence the support (half word share, half trigram share), its best value, its ratio to the best chunk
  for the same sentence, the share of sentences the chunk is the best source of and the share it holds at
  least half the best support for (a chunk that only supported a later sentence loses both when the
  answer is cut short); shared 4- and 8-grams;
  the answer's numbers found in the chunk; the weighted share of the chunk's own words found in the answer;
  the shares of the answer's new words and of its trigrams found in this chunk and in no other one;
* chunk sentences (RAGBench labels sentences; whole-chunk shares are diluted in long chunks): the best
  sentence's share of the query's content words, the best sentence's share of its own content words
  found in the answer, the number and share of sentences the answer draws on (one of its trigrams, or
  half the sentence's content words); the first answer sentence's support (what ``--perturb truncate``
  keeps) and its ratio to the best chunk's; the share of answer sentences this chunk is the *only* good
  source of (the only one with half the best support);
* shape: lengths (log), number of chunks, answer sentences, the share of chunks that are the best source
  of some answer sentence, an answer that declines to answer, the weighted share of the answer's content
  words that are not in the query (0 for an answer that only repeats the question);
* for the key values, the chunk's rank among the interaction's chunks (0 = best; ties share the best rank)
  and its gap to the best chunk: what generalises across domains is how a chunk compares with its
  neighbours, not an absolute overlap level.

No feature depends on the order of the chunks (position is deliberately not a feature): shuffling the
retrieved list changes no verdict. Everything is pure Python, linear in the text length, deterministic
(sums over sets use ``math.fsum``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ._text import ANSWER_STOP_KEYS, STOP_KEYS, content, grouped, sentence_words, words

__all__ = ["FEATURE_NAMES", "ChunkEvidence", "WordWeights", "chunk_features"]

_MAX_PARTS = 48
_UNKNOWN_WEIGHT = 8.0
_MIN_WEIGHT = 0.5
_NUMBER = re.compile(r"^\d+(?:[.,]\d+)*$")
# An answer that declines: "the context does not mention ...", "I cannot answer", "no information".
_REFUSAL = re.compile(
    r"\b(?:does not|doesn't|do not|don't|did not|cannot|can't|unable to|not (?:possible|able))\b"
    r"[^.]{0,60}\b(?:provide|mention|contain|include|answer|specify|say|state|determine|find|know)"
    r"|\bno (?:specific |relevant |further )?(?:information|mention|details?)\b"
    r"|\bnot (?:mentioned|provided|specified|stated|included)\b",
    re.IGNORECASE,
)

_BASE = (
    "q_cover_global",
    "q_cover_local",
    "q_bm25",
    "q_bigram",
    "a_cover",
    "support",
    "support_rel",
    "support_mean",
    "best_source_share",
    "ng4",
    "ng8",
    "numbers_shared",
    "answer_has_numbers",
    "chunk_in_answer",
    "a_exclusive",
    "tri_exclusive",
    "chunk_len_log",
    "chunk_len_rel",
    "support_half_share",
    "s_q_cover",
    "s_in_answer",
    "s_drawn_share",
    "s_drawn_count",
    "first_support",
    "first_support_rel",
    "only_source_share",
)
_RANKED = (
    "q_cover_global",
    "q_bm25",
    "a_cover",
    "support",
    "ng4",
    "chunk_in_answer",
    "q_cover_local",
    "best_source_share",
    "s_q_cover",
    "s_in_answer",
    "s_drawn_share",
    "first_support",
)
_SHAPE = (
    "n_chunks",
    "query_len_log",
    "answer_len_log",
    "answer_sentences",
    "refusal",
    "best_support_any",
    "best_q_cover_any",
    "sources_share",
    "a_new_share",
)
FEATURE_NAMES: tuple[str, ...] = (
    _BASE + tuple(f"{n}_rank" for n in _RANKED) + tuple(f"{n}_gap" for n in _RANKED) + _SHAPE
)
"""The order of the values in every feature row."""


@dataclass(frozen=True)
class ChunkEvidence:
    """What a reason quotes about one chunk (values as in the feature row).

    Attributes:
        query_cover: Globally weighted share of the query's words in the chunk, in [0, 1].
        support: Best support of one answer sentence by the chunk, in [0, 1].
        support_rel: ``support`` relative to the best chunk for the same sentence, in [0, 1].
        shared_terms: Distinct new answer words (content words not in the query) in the chunk.
        top_terms: Up to three of them, rarest first (empty when reasons were not asked for).
    """

    query_cover: float
    support: float
    support_rel: float
    shared_terms: int
    top_terms: tuple[str, ...] = ()


def _ngrams(seq: list[str], n: int) -> set[tuple[str, ...]]:
    return set(zip(*(seq[k:] for k in range(n)), strict=False))


class WordWeights(dict[str, float]):
    """Word key -> weight ``max(0.5, 8 - zipf)``: rare words weigh more, a word missing from the
    frequency table weighs 8 (as rare as it gets). Build once per model with :meth:`from_zipf`."""

    def __missing__(self, key: str) -> float:
        return _UNKNOWN_WEIGHT

    @classmethod
    def from_zipf(cls, zipf: Mapping[str, float]) -> WordWeights:
        return cls({t: max(_MIN_WEIGHT, _UNKNOWN_WEIGHT - z) for t, z in zipf.items()})


def _total(weights: WordWeights, terms: set[str]) -> float:
    # dict.get with a repeated default stays in C (no __missing__ call per unknown word).
    return math.fsum(map(weights.get, terms, itertools.repeat(_UNKNOWN_WEIGHT)))


def _ranks(values: Sequence[float]) -> list[float]:
    """0 for the best value, else the number of chunks strictly better (order independent)."""
    ordered = sorted(values, reverse=True)
    first: dict[float, int] = {}
    for position, v in enumerate(ordered):
        first.setdefault(v, position)
    return [float(first[v]) for v in values]


def _sentence_evidence(
    sentence_words: list[list[str]], tri_at: list[int], q_terms: set[str], a_terms: set[str]
) -> tuple[float, float, int]:
    """Of one chunk's sentences: the best one's share of the query's content words, the best one's
    share of its own content words found in the answer (``a_terms``; one word added to the count so a
    two-word title does not count as fully used), and how many sentences the answer draws on (holds one
    of the answer's trigrams, ``tri_at``: their word positions in the chunk, or half its content words).
    RAGBench labels chunk sentences; whole-chunk shares are diluted in long chunks. Counts, not
    weights: a few set operations per sentence."""
    best_q = best_in = 0.0
    drawn = 0
    start = 0
    at = 0
    n_q = len(q_terms)
    for keys in sentence_words:
        end = start + len(keys)
        copied = False
        while at < len(tri_at) and tri_at[at] < end:
            copied = True
            at += 1
        terms = set(keys) - STOP_KEYS
        found = len(terms & a_terms)
        if n_q:
            best_q = max(best_q, len(terms & q_terms) / n_q)
        best_in = max(best_in, found / (len(terms) + 1))
        if copied or (terms and 2 * found >= len(terms)):
            drawn += 1
        start = end
    return best_q, best_in, drawn


@dataclass
class _Interaction:
    """What every chunk's row is measured against: the query, the answer and the chunks' shared parts."""

    n: int
    chunk_sentences: list[list[list[str]]]
    chunk_words: list[list[str]]
    chunk_sets: list[set[str]]
    chunk_terms: list[set[str]]
    q_words: list[str]
    q_terms: set[str]
    q_bigrams: set[tuple[str, str]]
    a_words: list[str]
    sentence_count: int
    a_new: set[str]
    a_set: set[str]
    a_content: set[str]
    a_terms_total: float
    local: dict[str, float]
    a_ng4: set[tuple[str, ...]]
    a_ng8: set[tuple[str, ...]]
    a_numbers: set[str]
    lengths: list[int]
    avg_len: float
    max_len: int
    a_tri: set[tuple[str, ...]]
    tri_at: list[list[int]]
    chunk_tri: list[set[tuple[str, ...]]]
    support: list[list[float]]
    best_part: list[float]
    sole: list[int]
    seen_once: dict[str, int]
    tri_once: dict[tuple[str, ...], int]
    a_new_total: float
    q_total: float
    q_local_total: float


def _answer_parts(
    answer: str, q_terms: set[str]
) -> tuple[list[str], list[tuple[set[str], set[tuple[str, ...]]]], set[str], int]:
    """The answer's words in order, its parts (new content words or all of them, and trigrams) per
    sentence with content, its new words (not in the query) and its sentence count."""
    a_words: list[str] = []  # words(answer): the sentences' words in order (splits fall on whitespace)
    parts: list[tuple[set[str], set[tuple[str, ...]]]] = []
    a_new: set[str] = set()
    sentence_list = sentence_words(answer)
    for keys in sentence_list:
        a_words.extend(keys)
        terms = content(keys, ANSWER_STOP_KEYS)
        if terms:
            new = terms - q_terms
            a_new |= new
            parts.append((new or terms, _ngrams(keys, 3)))
    return a_words, parts, a_new, len(sentence_list)


def _local_weights(q_terms: set[str], chunk_sets: list[set[str]], n: int) -> dict[str, float]:
    """Each query word's weight within the interaction: ``ln(1 + (N + 1) / (df + 1))``."""
    df = dict.fromkeys(q_terms, 0)
    for cs in chunk_sets:
        for t in q_terms & cs:
            df[t] += 1
    return {t: math.log(1.0 + (n + 1) / (d + 1)) for t, d in df.items()}


def _support(
    parts: list[tuple[set[str], set[tuple[str, ...]]]],
    chunk_sets: list[set[str]],
    chunk_tri: list[set[tuple[str, ...]]],
    weight: WordWeights,
) -> list[list[float]]:
    """support[j][i]: how much of answer part j chunk i holds (half word share, half trigram share)."""
    support: list[list[float]] = []
    for terms, tri in parts:
        total = _total(weight, terms)
        row = []
        for i in range(len(chunk_sets)):
            share = _total(weight, terms & chunk_sets[i]) / total if total else 0.0
            copied = len(tri & chunk_tri[i]) / len(tri) if tri else share
            row.append(0.5 * share + 0.5 * copied)
        support.append(row)
    return support


def _sole_sources(support: list[list[float]], best_part: list[float]) -> list[int]:
    """Per answer part, the only chunk holding at least half the best support, else -1."""
    sole: list[int] = []
    for r, b in zip(support, best_part, strict=True):
        holders = [i for i, v in enumerate(r) if b > 0 and v >= 0.5 * b]
        sole.append(holders[0] if len(holders) == 1 else -1)
    return sole


def _occurrences(
    a_new: set[str], chunk_sets: list[set[str]], chunk_tri: list[set[tuple[str, ...]]]
) -> tuple[dict[str, int], dict[tuple[str, ...], int]]:
    """In how many chunks each new answer word and each shared trigram occurs."""
    seen_once: dict[str, int] = {}
    for cs in chunk_sets:
        for t in a_new & cs:
            seen_once[t] = seen_once.get(t, 0) + 1
    tri_once: dict[tuple[str, ...], int] = {}
    for ct in chunk_tri:
        for gram in ct:
            tri_once[gram] = tri_once.get(gram, 0) + 1
    return seen_once, tri_once


def _interaction(query: str, answer: str, chunks: Sequence[str], weight: WordWeights) -> _Interaction:
    n = len(chunks)
    # Each chunk's words sentence by sentence (splits fall on whitespace: the concatenation is words(c)).
    chunk_sentences = [sentence_words(c) for c in chunks]
    chunk_words = [list(itertools.chain.from_iterable(ss)) for ss in chunk_sentences]
    chunk_sets = [set(w) for w in chunk_words]
    chunk_terms = [cs - STOP_KEYS for cs in chunk_sets]
    q_words = words(query)
    q_terms = content(q_words, STOP_KEYS)
    q_bigrams = set(itertools.pairwise(q_words))
    a_words, parts, a_new, sentence_count = _answer_parts(answer, q_terms)
    a_set = set(a_words)
    a_content = a_set - STOP_KEYS
    a_terms_total = _total(weight, content(a_words, ANSWER_STOP_KEYS))
    parts = grouped(parts, _MAX_PARTS)
    local = _local_weights(q_terms, chunk_sets, n)
    lengths = [len(w) for w in chunk_words]
    a_tri = set().union(*(p[1] for p in parts))
    # The chunk's trigrams that occur in the answer (all that any comparison below needs).
    # Where each chunk has one of the answer's trigrams, and which: one pass over the chunk's words.
    tri_at = [
        [p for p, t in enumerate(zip(w, w[1:], w[2:], strict=False)) if t in a_tri] for w in chunk_words
    ]
    chunk_tri: list[set[tuple[str, ...]]] = [
        {(w[p], w[p + 1], w[p + 2]) for p in at} for w, at in zip(chunk_words, tri_at, strict=True)
    ]
    support = _support(parts, chunk_sets, chunk_tri, weight)
    best_part = [max(r) for r in support]
    # Answer words and trigrams found in exactly one chunk: evidence only that chunk can explain.
    seen_once, tri_once = _occurrences(a_new, chunk_sets, chunk_tri)
    return _Interaction(
        n=n,
        chunk_sentences=chunk_sentences,
        chunk_words=chunk_words,
        chunk_sets=chunk_sets,
        chunk_terms=chunk_terms,
        q_words=q_words,
        q_terms=q_terms,
        q_bigrams=q_bigrams,
        a_words=a_words,
        sentence_count=sentence_count,
        a_new=a_new,
        a_set=a_set,
        a_content=a_content,
        a_terms_total=a_terms_total,
        local=local,
        a_ng4=_ngrams(a_words, 4),
        a_ng8=_ngrams(a_words, 8),
        a_numbers={w for w in a_set if _NUMBER.match(w)},
        lengths=lengths,
        avg_len=sum(lengths) / n or 1.0,
        max_len=max(lengths) or 1,
        a_tri=a_tri,
        tri_at=tri_at,
        chunk_tri=chunk_tri,
        support=support,
        best_part=best_part,
        sole=_sole_sources(support, best_part),
        seen_once=seen_once,
        tri_once=tri_once,
        a_new_total=_total(weight, a_new),
        q_total=_total(weight, q_terms),
        q_local_total=math.fsum(local.values()),
    )


def _query_side(x: _Interaction, i: int, weight: WordWeights) -> list[float]:
    """Global and local weighted query coverage, BM25, the share of query bigrams."""
    cs = x.chunk_sets[i]
    q_in = x.q_terms & cs
    if q_in:  # one counting pass over the chunk (not one per query word): linear in the text
        counts = Counter(x.chunk_words[i])
        tf = {t: counts[t] for t in q_in}
    else:
        tf = {}
    norm = 1.2 * (0.25 + 0.75 * x.lengths[i] / x.avg_len)
    bm25 = math.fsum(weight[t] * tf[t] * 2.2 / (tf[t] + norm) for t in sorted(tf))
    q_cover_g = _total(weight, q_in) / x.q_total if x.q_total > 0 else 0.0
    q_cover_l = math.fsum(map(x.local.__getitem__, q_in)) / x.q_local_total if x.q_local_total > 0 else 0.0
    q_bigram = (
        len({b for b in itertools.pairwise(x.chunk_words[i]) if b in x.q_bigrams}) / len(x.q_bigrams)
        if any(a in cs and b in cs for a, b in x.q_bigrams)
        else 0.0
    )
    return [q_cover_g, q_cover_l, bm25, q_bigram]


def _answer_support(col: list[float], best_part: list[float]) -> tuple[float, float, float, float, float]:
    """Of one chunk's support per answer part: best, best ratio to the best chunk, mean, and the shares
    of parts it is the best source of and holds at least half the best support for."""
    sup = max(col, default=0.0)
    rel = max((v / b for v, b in zip(col, best_part, strict=True) if b > 0), default=0.0)
    mean = sum(col) / len(col) if col else 0.0
    best_src = (
        sum(1 for v, b in zip(col, best_part, strict=True) if b > 0 and v >= b) / len(col) if col else 0.0
    )
    half_src = (
        sum(1 for v, b in zip(col, best_part, strict=True) if b > 0 and v >= 0.5 * b) / len(col)
        if col
        else 0.0
    )
    return sup, rel, mean, best_src, half_src


def _shared_text(x: _Interaction, i: int, weight: WordWeights) -> list[float]:
    """Shared 4- and 8-grams, the answer's numbers, the chunk's words in the answer, and the answer's
    words and trigrams found only in this chunk."""
    cs = x.chunk_sets[i]
    # Longer shared n-grams start where a shared trigram does: look only there.
    cw = x.chunk_words[i]
    starts = x.tri_at[i]
    ng4 = len(x.a_ng4 & {tuple(cw[p : p + 4]) for p in starts}) / len(x.a_ng4) if x.a_ng4 else 0.0
    ng8 = 1.0 if x.a_ng8 and not x.a_ng8.isdisjoint({tuple(cw[p : p + 8]) for p in starts}) else 0.0
    numbers = len(x.a_numbers & cs) / len(x.a_numbers) if x.a_numbers else 0.0
    only_here = {t for t in x.a_new & cs if x.seen_once[t] == 1}
    a_exclusive = _total(weight, only_here) / x.a_new_total if x.a_new_total else 0.0
    tri_exclusive = (
        sum(1 for gram in x.chunk_tri[i] if x.tri_once[gram] == 1) / len(x.a_tri) if x.a_tri else 0.0
    )
    own_weight = _total(weight, x.chunk_terms[i])
    in_answer = _total(weight, x.chunk_terms[i] & x.a_set) / own_weight if own_weight else 0.0
    return [ng4, ng8, numbers, 1.0 if x.a_numbers else 0.0, in_answer, a_exclusive, tri_exclusive]


def _base_row(x: _Interaction, i: int, weight: WordWeights) -> list[float]:
    """The chunk's own features (:data:`_BASE` order)."""
    a_cover = _total(weight, x.a_new & x.chunk_sets[i]) / x.a_new_total if x.a_new_total > 0 else 0.0
    sup, rel, mean, best_src, half_src = _answer_support([r[i] for r in x.support], x.best_part)
    s_q, s_in, drawn = _sentence_evidence(x.chunk_sentences[i], x.tri_at[i], x.q_terms, x.a_content)
    n_sent = len(x.chunk_sentences[i])
    first = x.support[0][i] if x.support else 0.0
    only = sum(1 for s in x.sole if s == i) / len(x.sole) if x.sole else 0.0
    return [
        *_query_side(x, i, weight),
        a_cover,
        sup,
        rel,
        mean,
        best_src,
        *_shared_text(x, i, weight),
        math.log1p(x.lengths[i]),
        x.lengths[i] / x.max_len,
        half_src,
        s_q,
        s_in,
        drawn / n_sent if n_sent else 0.0,
        float(drawn),
        first,
        first / x.best_part[0] if x.support and x.best_part[0] > 0 else 0.0,
        only,
    ]


def _evidence(x: _Interaction, i: int, row: list[float], weight: WordWeights, reasons: bool) -> ChunkEvidence:
    shared = x.a_new & x.chunk_sets[i]
    top: tuple[str, ...] = ()
    if reasons and shared:
        top = tuple(sorted(shared, key=lambda t: (-weight[t], t))[:3])
    return ChunkEvidence(row[0], row[5], row[6], len(shared), top)


def _shape(x: _Interaction, answer: str, base: list[list[float]], weight: WordWeights) -> list[float]:
    """Interaction-level features (:data:`_SHAPE` order), the same on every row."""
    return [
        float(x.n),
        math.log1p(len(x.q_words)),
        math.log1p(len(x.a_words)),
        float(x.sentence_count),
        1.0 if _REFUSAL.search(answer) else 0.0,
        max(row[5] for row in base),
        max(row[0] for row in base),
        sum(1 for row in base if row[8] > 0) / x.n,
        _total(weight, x.a_new) / x.a_terms_total if x.a_terms_total > 0 else 0.0,
    ]


def _with_ranks(base: list[list[float]], shape: list[float]) -> list[list[float]]:
    """Each row followed by its ranks and gaps to the best chunk (:data:`_RANKED` columns) and the shape."""
    ranked_columns = [_BASE.index(name) for name in _RANKED]
    ranks = [_ranks([row[c] for row in base]) for c in ranked_columns]
    bests = [max(row[c] for row in base) for c in ranked_columns]
    rows = []
    for i, row in enumerate(base):
        rank_values = [r[i] for r in ranks]
        gaps = [b - row[c] for b, c in zip(bests, ranked_columns, strict=True)]
        rows.append(row + rank_values + gaps + shape)
    return rows


def chunk_features(
    query: str,
    answer: str,
    chunks: Sequence[str],
    weight: WordWeights,
    *,
    evidence: bool = False,
    reasons: bool = False,
) -> tuple[list[list[float]], list[ChunkEvidence]]:
    """One feature row per chunk (values in :data:`FEATURE_NAMES` order) and, when ``evidence`` is true,
    the :class:`ChunkEvidence` of each chunk (``top_terms`` filled only when ``reasons`` is true).

    ``weight`` gives each word key its weight (:class:`WordWeights`, from the model's word-frequency
    table). Linear in the total text length.
    """
    if not chunks:
        return [], []
    x = _interaction(query, answer, chunks, weight)
    base = [_base_row(x, i, weight) for i in range(x.n)]
    out_evidence = [_evidence(x, i, row, weight, reasons) for i, row in enumerate(base)] if evidence else []
    return _with_ranks(base, _shape(x, answer, base, weight)), out_evidence
