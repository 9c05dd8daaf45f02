"""LexicalJudge: an offline, deterministic judge from word overlap (baseline; to be tuned)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ._base import ChunkVerdict, JudgeResult

__all__ = ["LexicalJudge"]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "do",
        "does",
        "did",
        "not",
        "no",
        "yes",
        "i",
        "you",
        "he",
        "she",
        "we",
        "they",
        "them",
        "his",
        "her",
        "their",
        "our",
        "your",
        "my",
        "me",
        "us",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "have",
        "has",
        "had",
        "than",
        "then",
        "there",
        "here",
        "so",
        "such",
        "into",
        "about",
        "over",
        "under",
        "also",
        "more",
        "most",
        "some",
        "any",
        "all",
        "each",
        "other",
    ]
)


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class LexicalJudge:
    """Judges relevance by query-word overlap and utilization by answer-word overlap.

    Deterministic, pure Python, no network. ``model`` is ``None``.
    """

    name = "lexical"
    model: str | None = None

    def __init__(self, relevance_threshold: float = 0.1, utilization_threshold: float = 0.3) -> None:
        self.relevance_threshold = relevance_threshold
        self.utilization_threshold = utilization_threshold

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        return JudgeResult(verdicts=self.judge_sync(query, answer, chunks, reasons=reasons))

    def judge_sync(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> list[ChunkVerdict]:
        q = set(_words(query))
        a = set(_words(answer))
        out = []
        for i, chunk in enumerate(chunks):
            c = set(_words(chunk))
            rel = len(q & c) / len(q) if q else 0.0
            use = len(a & c) / len(a) if a else 0.0
            out.append(
                ChunkVerdict(
                    index=i,
                    is_relevant=rel >= self.relevance_threshold,
                    is_utilized=use >= self.utilization_threshold,
                    reason=f"query overlap {rel:.2f}, answer overlap {use:.2f}" if reasons else "",
                )
            )
        return out
