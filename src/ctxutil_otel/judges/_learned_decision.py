"""The learned judge's decision rule: from per-chunk probabilities to verdicts (steps 3-4 of
:mod:`ctxutil_otel.judges._learned`).

:func:`decide` is the whole rule, used by :class:`~ctxutil_otel.judges.LearnedJudge` at run time and by
``benchmarks/_train_decision.py`` to measure it out of fold: relevance by a threshold on P(relevant) and
a fallback to the most likely chunk (:func:`decide_relevant`); then the expected number of used relevant
chunks, the sum of their P(utilized | relevant) (:func:`expected_used`), rounded to a whole count, and
that many of the most likely used relevant chunks marked utilized (:func:`decide_utilized`). Each chunk
counts only through its own probabilities, so chunks that are not relevant move no verdict here (the
features themselves are read across the interaction: ranks, gaps, in-interaction word weights), and the
count follows the evidence of use rather than a training set's typical score (an answer drawn from one of
several relevant chunks still scores above the right share on average: docs/judges.md, Known limits).
The parameters are the model file's :class:`~ctxutil_otel.judges._learned_model.Decision`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from ._learned_model import Decision

__all__ = [
    "Verdicts",
    "decide",
    "decide_relevant",
    "decide_utilized",
    "expected_used",
    "rounded_count",
    "utilized_why",
]


def _tie(ties: Sequence[str] | None, n: int) -> Sequence[str]:
    return ties if ties is not None else [""] * n


def decide_relevant(
    p_rel: Sequence[float], threshold: float, fallback: float, ties: Sequence[str] | None = None
) -> list[bool]:
    """Relevance verdicts from P(relevant): the threshold, then the fallback to the most likely chunk
    (equal probabilities: the smaller ``ties`` key, e.g. the chunk's text, then the earlier chunk)."""
    relevant = [p >= threshold for p in p_rel]
    if p_rel and not any(relevant):
        tie = _tie(ties, len(p_rel))
        best = min(range(len(p_rel)), key=lambda i: (-p_rel[i], tie[i], i))
        if p_rel[best] >= fallback:
            relevant[best] = True
    return relevant


def expected_used(p_use: Sequence[float], relevant: Sequence[bool]) -> float:
    """The expected number of used chunks among the ``relevant`` ones: the sum of their P(utilized |
    relevant) (a count, from 0 to the number of relevant chunks)."""
    return math.fsum(p for p, r in zip(p_use, relevant, strict=True) if r)


def decide_utilized(
    expected: float,
    p_use: Sequence[float],
    relevant: Sequence[bool],
    offset: float = 0.5,
    ties: Sequence[str] | None = None,
) -> list[bool]:
    """Mark the ``floor(expected + offset)`` relevant chunks with the highest P(utilized) utilized
    (``expected`` a count of chunks, as :func:`expected_used` gives; ``offset`` 0.5 rounds to the
    nearest count; at most every relevant chunk; ties go to the smaller ``ties`` key, then the earlier
    chunk)."""
    candidates = [i for i, r in enumerate(relevant) if r]
    k = rounded_count(expected, len(candidates), offset)
    tie = _tie(ties, len(p_use))
    chosen = set(sorted(candidates, key=lambda i: (-p_use[i], tie[i], i))[:k])
    return [i in chosen for i in range(len(relevant))]


def rounded_count(expected: float, n_relevant: int, offset: float = 0.5) -> int:
    """How many chunks :func:`decide_utilized` marks: ``floor(expected + offset)``, from 0 to
    ``n_relevant``."""
    return min(n_relevant, max(0, math.floor(expected + offset)))


def utilized_why(p_use: float, utilized: bool, expected: float, n_relevant: int, offset: float) -> str:
    """Why a relevant chunk is or is not utilized under the rule: a clause for its reason, starting with
    ``"; "`` ("" when its probability says it all). ``expected``, ``n_relevant``: the interaction's
    expected number of used relevant chunks and its number of relevant chunks; ``offset``: the
    decision's ``round_offset``. A chunk the models find less likely used than not may complete the
    rounded count, and one more likely used than not may be left outside it: the clause says so."""
    count = f"{expected:.2f} of the {n_relevant} relevant chunk{'s' if n_relevant != 1 else ''} expected used"
    k = rounded_count(expected, n_relevant, offset)
    if utilized:
        return f"; counted to make up the {count}, rounded to {k}" if p_use < 0.5 else ""
    if p_use >= 0.5:
        return f"; {count}, rounded to {k}: more likely used chunks make up the count"
    return f"; {count}"


class Verdicts(NamedTuple):
    """One interaction's verdicts: per chunk relevant and utilized, and the expected number of used
    relevant chunks they express (:func:`expected_used`; 0.0 when nothing is relevant)."""

    relevant: list[bool]
    utilized: list[bool]
    expected: float


def decide(
    decision: Decision,
    p_rel: Sequence[float],
    p_use: Sequence[float],
    ties: Sequence[str] | None = None,
) -> Verdicts:
    """The judge's whole decision rule (module docstring): relevance by the threshold and the fallback
    (:func:`decide_relevant`), then the expected number of used relevant chunks, rounded by the
    decision's ``round_offset``, marked utilized in order of P(utilized | relevant)
    (:func:`decide_utilized`). ``ties`` (e.g. the chunks' texts) break equal probabilities, so the
    retrieved order changes no verdict. The trainer measures decisions with this same function."""
    relevant = decide_relevant(p_rel, decision.relevance_threshold, decision.fallback_threshold, ties)
    if not any(relevant):
        return Verdicts(relevant, [False] * len(relevant), 0.0)
    expected = expected_used(p_use, relevant)
    return Verdicts(
        relevant, decide_utilized(expected, p_use, relevant, decision.round_offset, ties), expected
    )
