"""LexicalJudge: an offline judge from word overlap between answer, chunks and query (the default is
:class:`~ctxutil_otel.judges.LearnedJudge`; this one stays selectable as ``judge="lexical"``).

How it decides (thresholds tuned on ``ragbench_train.jsonl`` by ``benchmarks/tune_lexical.py``):

1. **Support.** For every answer sentence and chunk: half the IDF-weighted share of the sentence's
   *new* content words (not in the query; all its content words when it only restates the query)
   found in the chunk, plus half the share of the sentence's word trigrams (stopwords kept) found in
   the chunk. IDF is computed within the interaction's own chunks, ``ln(1 + (N + 1) / (df + 1))``,
   so a word every chunk contains is weak evidence. ``support`` is the best value over the
   sentences; ``support_rel`` is the best ratio to the strongest chunk for the same sentence.
2. **Utilized** when ``support_rel >= utilization_threshold`` and ``support >= min_support``: the
   chunk is (one of) the best sources of some answer sentence.
3. **Relevant** when utilized (a chunk the answer used is relevant: in the RAGBench labels 98% of
   utilized chunks are relevant), or when ``query_cover + support + term_weight * min(answer_terms,
   max_terms) >= relevance_threshold``, where ``query_cover`` is the IDF-weighted share of query
   content words in the chunk and ``answer_terms`` the number of distinct new answer words in it.
4. **Fallback.** When no chunk is relevant but some chunk shares a query word, the chunk with the
   highest relevance score is relevant (and not utilized): the answer ignored on-topic context.

Cost is linear in the total text length (answers of more than ``MAX_ANSWER_PARTS`` sentences are
compared in that many groups), pure Python, no network. Sums over word sets use ``math.fsum``, so the
verdicts do not depend on set iteration order (``PYTHONHASHSEED``): same input, same verdicts in
every process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._base import ChunkVerdict, JudgeResult
from ._text import ANSWER_STOP_KEYS, STOP_KEYS, content, grouped, sentences, words

__all__ = ["ChunkSignals", "LexicalJudge"]


@dataclass(frozen=True)
class ChunkSignals:
    """The lexical evidence about one chunk (all in [0, 1] except ``answer_terms``).

    Attributes:
        support: Best share of one answer sentence found in the chunk (see the module docstring).
        support_rel: ``support`` relative to the strongest chunk for the same answer sentence.
        query_cover: IDF-weighted share of the query's content words present in the chunk.
        answer_terms: Distinct new answer words (content words not in the query) present in the chunk.
        top_terms: Up to three of those words, rarest across the chunks first (empty when reasons
            were not requested).
    """

    support: float
    support_rel: float
    query_cover: float
    answer_terms: int
    top_terms: tuple[str, ...] = ()


MAX_ANSWER_PARTS = 64
"""Answers with more content sentences are compared in this many groups of consecutive sentences."""


def _trigrams(words: list[str]) -> set[tuple[str, str, str]]:
    return set(zip(words, words[1:], words[2:], strict=False))


class LexicalJudge:
    """An offline judge: relevance and utilization from word overlap (module docstring).

    Keyword-only arguments.

    Deterministic (same input, same verdicts), pure Python, no network, no model. ``model`` is ``None``.

    Args:
        utilization_threshold: Minimum ``support_rel`` for "utilized", in [0, 1].
        min_support: Minimum absolute ``support`` for "utilized", in [0, 1].
        relevance_threshold: Minimum relevance score (``query_cover + support + term_weight *
            min(answer_terms, max_terms)``) for "relevant" when not utilized.
        term_weight: Weight of each shared new answer word in the relevance score.
        max_terms: Cap on the number of shared answer words counted.
        fallback: Mark the best on-topic chunk relevant when nothing else is.

    Raises:
        ValueError: for a threshold outside [0, 1], a negative weight or cap.
    """

    name = "lexical"
    model: str | None = None

    def __init__(
        self,
        *,
        utilization_threshold: float = 0.3,
        min_support: float = 0.1,
        relevance_threshold: float = 0.9,
        term_weight: float = 0.2,
        max_terms: int = 5,
        fallback: bool = True,
        max_text_chars: int = 20_000,
    ) -> None:
        for field, value in (("utilization_threshold", utilization_threshold), ("min_support", min_support)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{field} must be in [0, 1], got {value!r}")
        if relevance_threshold < 0 or term_weight < 0 or max_terms < 0:
            raise ValueError("relevance_threshold, term_weight and max_terms must be >= 0")
        if max_text_chars < 1:
            raise ValueError(f"max_text_chars must be >= 1, got {max_text_chars!r}")
        self.max_text_chars = max_text_chars
        self.utilization_threshold = utilization_threshold
        self.min_support = min_support
        self.relevance_threshold = relevance_threshold
        self.term_weight = term_weight
        self.max_terms = max_terms
        self.fallback = fallback

    def __repr__(self) -> str:
        return (
            f"LexicalJudge(utilization_threshold={self.utilization_threshold}, min_support="
            f"{self.min_support}, relevance_threshold={self.relevance_threshold}, term_weight="
            f"{self.term_weight}, max_terms={self.max_terms}, fallback={self.fallback}, "
            f"max_text_chars={self.max_text_chars})"
        )

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        """Return one verdict per chunk (``usage`` is ``None``: no tokens are spent)."""
        return JudgeResult(verdicts=self.judge_sync(query, answer, chunks, reasons=reasons))

    def judge_sync(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> list[ChunkVerdict]:
        """Synchronous :meth:`judge` (CPU-only; well under a millisecond for typical RAG text).

        Only the first ``max_text_chars`` characters (default 20,000) of the answer and of each chunk
        are read: the judge runs on the evaluator's worker thread and holds the GIL while it works, so
        its cost per evaluation is bounded (about 10 ms at the cap) whatever the application retrieves.
        RAGBench's longest chunk is 3,676 characters, far below the cap.
        """
        cap = self.max_text_chars
        if len(answer) > cap or any(len(c) > cap for c in chunks):
            answer = answer[:cap]
            chunks = [c[:cap] for c in chunks]
        return self.decide(self.signals(query[:cap], answer, chunks, reasons=reasons), reasons=reasons)

    def relevance_score(self, s: ChunkSignals) -> float:
        """``query_cover + support + term_weight * min(answer_terms, max_terms)``."""
        return s.query_cover + s.support + self.term_weight * min(s.answer_terms, self.max_terms)

    def flags(self, signals: Sequence[ChunkSignals]) -> tuple[list[bool], list[bool], int]:
        """``(relevant, utilized, fallback_index)`` for per-chunk signals with this judge's thresholds.

        ``fallback_index`` is the chunk made relevant by the fallback rule, or -1.
        """
        utilized = [
            s.support > 0 and s.support >= self.min_support and s.support_rel >= self.utilization_threshold
            for s in signals
        ]
        scores = [self.relevance_score(s) for s in signals]
        relevant = [u or r >= self.relevance_threshold for u, r in zip(utilized, scores, strict=True)]
        fallback_index = -1
        if self.fallback and signals and not any(relevant):
            best = max(range(len(signals)), key=lambda i: (scores[i], -i))
            if signals[best].query_cover > 0:
                relevant[best] = True
                fallback_index = best
        return relevant, utilized, fallback_index

    def decide(self, signals: Sequence[ChunkSignals], *, reasons: bool = True) -> list[ChunkVerdict]:
        """Turn per-chunk :class:`ChunkSignals` into verdicts with this judge's thresholds."""
        relevant, utilized, fallback_index = self.flags(signals)
        return [
            ChunkVerdict(
                index=i,
                is_relevant=relevant[i],
                is_utilized=utilized[i],
                reason=_reason(s, relevant[i], utilized[i], i == fallback_index) if reasons else "",
            )
            for i, s in enumerate(signals)
        ]

    def signals(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> list[ChunkSignals]:
        """Compute the :class:`ChunkSignals` of every chunk, in order (linear in the text length)."""
        n = len(chunks)
        if n == 0:
            return []
        chunk_words = [words(c) for c in chunks]
        chunk_sets = [set(w) for w in chunk_words]
        query_terms = content(words(query), STOP_KEYS)
        answer_parts: list[tuple[set[str], set[tuple[str, str, str]]]] = []
        answer_new: set[str] = set()
        for sentence in sentences(answer):
            keys = words(sentence)
            terms = content(keys, ANSWER_STOP_KEYS)
            if terms:
                new = terms - query_terms
                answer_new |= new
                answer_parts.append((new or terms, _trigrams(keys)))
        answer_parts = grouped(answer_parts, MAX_ANSWER_PARTS)

        # Document frequency within this interaction's chunks, only for the words that matter.
        vocabulary = query_terms.union(*(terms for terms, _ in answer_parts))
        df = dict.fromkeys(vocabulary, 0)
        for cs in chunk_sets:
            for t in vocabulary & cs:  # CPython iterates the smaller set: O(min size)
                df[t] += 1
        idf = {t: math.log(1.0 + (n + 1) / (d + 1)) for t, d in df.items()}

        # support[j][i]: how much of answer part j chunk i holds (set intersections: O(min size)).
        support: list[list[float]] = []
        chunk_trigrams = [_trigrams(w) for w in chunk_words] if answer_parts else []
        for terms, trigrams in answer_parts:
            total = math.fsum(idf[t] for t in terms)
            row = []
            for cs, ct in zip(chunk_sets, chunk_trigrams, strict=True):
                share = math.fsum(idf[t] for t in terms & cs) / total
                copied = len(trigrams & ct) / len(trigrams) if trigrams else share
                row.append(0.5 * share + 0.5 * copied)
            support.append(row)
        best_per_part = [max(row) for row in support]

        query_total = math.fsum(idf[t] for t in query_terms)
        out = []
        for i in range(n):
            cs = chunk_sets[i]
            sup = max((row[i] for row in support), default=0.0)
            rel = max(
                (row[i] / best for row, best in zip(support, best_per_part, strict=True) if best > 0),
                default=0.0,
            )
            cover = math.fsum(idf[t] for t in query_terms if t in cs) / query_total if query_total else 0.0
            shared = answer_new & cs
            top: tuple[str, ...] = ()
            if reasons and shared:
                top = tuple(sorted(shared, key=lambda t: (-idf.get(t, 0.0), t))[:3])
            out.append(ChunkSignals(sup, rel, cover, len(shared), top))
        return out


def _reason(s: ChunkSignals, relevant: bool, utilized: bool, fallback: bool) -> str:
    terms = ""
    if s.top_terms:
        terms = " incl. " + ", ".join(f"'{t}'" for t in s.top_terms)
    evidence = (
        f"shares {s.answer_terms} answer term{'s' if s.answer_terms != 1 else ''}{terms}; "
        f"answer support {s.support:.2f} ({s.support_rel:.2f} of best); query overlap {s.query_cover:.2f}"
    )
    if utilized:
        return f"used: {evidence}"
    if fallback:
        return f"relevant (best on-topic chunk), not used: {evidence}"
    if relevant:
        return f"relevant, not used: {evidence}"
    return f"not relevant: {evidence}"
