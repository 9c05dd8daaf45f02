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
    "decide_utilized_each",
    "expected_used",
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
    floor: float = 0.0,
) -> list[bool]:
    """The ``count`` rule: mark the ``floor(expected + offset)`` relevant chunks with the highest
    P(utilized) utilized (``expected`` a count of chunks, as :func:`expected_used` gives; ``offset`` 0.5
    rounds to the nearest count; at most every relevant chunk; ties go to the smaller ``ties`` key, then
    the earlier chunk), each only if its P(utilized) >= ``floor``."""
    candidates = [i for i, r in enumerate(relevant) if r]
    k = min(len(candidates), max(0, math.floor(expected + offset)))
    tie = _tie(ties, len(p_use))
    chosen = {i for i in sorted(candidates, key=lambda i: (-p_use[i], tie[i], i))[:k] if p_use[i] >= floor}
    return [i in chosen for i in range(len(relevant))]


def decide_utilized_each(
    p_use: Sequence[float],
    relevant: Sequence[bool],
    threshold: float,
    fallback: float = 1.0,
    ties: Sequence[str] | None = None,
) -> list[bool]:
    """The ``threshold`` rule: each relevant chunk is utilized when its P(utilized | relevant) >=
    ``threshold``; when none is, the most likely one is if its P(utilized) >= ``fallback`` (ties: the
    smaller ``ties`` key, then the earlier chunk)."""
    utilized = [r and p >= threshold for p, r in zip(p_use, relevant, strict=True)]
    candidates = [i for i, r in enumerate(relevant) if r]
    if candidates and not any(utilized):
        tie = _tie(ties, len(p_use))
        best = min(candidates, key=lambda i: (-p_use[i], tie[i], i))
        utilized[best] = p_use[best] >= fallback
    return utilized


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
    (:func:`decide_relevant`), then utilization by the decision's ``utilized_rule``: ``threshold``, each
    relevant chunk by its own P(utilized | relevant) (:func:`decide_utilized_each`), or ``count``, the
    expected number of used relevant chunks rounded by ``round_offset`` and marked utilized in order of
    P(utilized | relevant) (:func:`decide_utilized`). ``ties`` (e.g. the chunks' texts) break equal
    probabilities, so the retrieved order changes no verdict. The trainer measures decisions with this
    same function."""
    relevant = decide_relevant(p_rel, decision.relevance_threshold, decision.fallback_threshold, ties)
    if not any(relevant):
        return Verdicts(relevant, [False] * len(relevant), 0.0)
    expected = expected_used(p_use, relevant)
    if decision.utilized_rule == "threshold":
        utilized = decide_utilized_each(p_use, relevant, decision.used_threshold, decision.used_fallback, ties)
    else:
        utilized = decide_utilized(
            expected, p_use, relevant, decision.round_offset, ties, decision.used_threshold
        )
    return Verdicts(relevant, utilized, expected)
