"""The learned judge's decision rule: from per-chunk probabilities to verdicts (steps 3-4 of
:mod:`ctxutil_otel.judges._learned`).

:func:`decide` is the whole rule, used by :class:`~ctxutil_otel.judges.LearnedJudge` at run time and by
``benchmarks/_train_decision.py`` to measure decisions out of fold: relevance by a threshold on
P(relevant) and a fallback to the most likely chunk (:func:`decide_relevant`); the row model's estimate
of the score from :func:`row_features`; borderline chunks joining or leaving the relevant ones so that
utilized / relevant can come close to it (:func:`follow_estimate`); then the most likely used chunks
marked utilized (:func:`decide_utilized`). The parameters are the model file's
:class:`~ctxutil_otel.judges._learned_model.Decision`, chosen on out-of-fold training predictions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

from ._learned_features import FEATURE_NAMES
from ._learned_model import Decision

__all__ = [
    "Verdicts",
    "decide",
    "decide_relevant",
    "decide_utilized",
    "follow_estimate",
    "row_features",
]

_AT = {
    name: FEATURE_NAMES.index(name)
    for name in (
        "refusal",
        "best_support_any",
        "answer_len_log",
        "answer_sentences",
        "best_source_share",
        "support_half_share",
        "support_rel",
    )
}


def row_features(
    p_rel: Sequence[float],
    p_use: Sequence[float],
    relevant: Sequence[bool],
    features: Sequence[Sequence[float]],
) -> list[float]:
    """The row model's inputs (``ROW_FEATURES`` order) for chunk probabilities, the verdicts on
    relevance and the chunks' feature rows (interaction-wide values are read from the first).

    Chunks not relevant enter only through ``use_expected`` (weighted by their P(relevant)), so
    appending chunks with P(relevant) near 0 (off-topic ones) leaves the inputs unchanged: the number of
    chunks and the mean P(relevant) over all of them are not inputs (they were, and moved the score
    when off-topic chunks were appended)."""
    used = [u for u, r in zip(p_use, relevant, strict=True) if r]
    first = features[0]
    rel_rows = [x for x, r in zip(features, relevant, strict=True) if r]
    # The share of the *relevant* chunks that are the best source of some answer sentence: a share over
    # all chunks (the chunk feature sources_share, format 2) fell with every chunk appended.
    best = _AT["best_source_share"]
    half = _AT["support_half_share"]
    support_rel = _AT["support_rel"]
    total_rel = math.fsum(p_rel)
    expected = (
        math.fsum(r * u for r, u in zip(p_rel, p_use, strict=True)) / total_rel if total_rel > 0 else 0.0
    )
    rel_p = [p for p, r in zip(p_rel, relevant, strict=True) if r]
    return [
        float(len(used)),
        math.fsum(used) / len(used) if used else 0.0,
        min(used, default=0.0),
        max(used, default=0.0),
        expected,
        sum(1 for u in used if u >= 0.5) / len(used) if used else 0.0,
        math.fsum(rel_p) / len(rel_p) if rel_p else 0.0,
        max(p_rel),
        first[_AT["refusal"]],
        first[_AT["best_support_any"]],
        first[_AT["answer_len_log"]],
        first[_AT["answer_sentences"]],
        sum(1 for x in rel_rows if x[best]) / len(rel_rows) if rel_rows else 0.0,
        math.fsum(x[half] for x in rel_rows) / len(rel_rows) if rel_rows else 0.0,
        math.fsum(x[support_rel] for x in rel_rows) / len(rel_rows) if rel_rows else 0.0,
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


def _count(score: float, n: int, offset: float) -> int:
    return min(n, math.floor(min(1.0, max(0.0, score)) * n + offset))


def follow_estimate(
    p_rel: Sequence[float],
    relevant: Sequence[bool],
    score: float,
    *,
    low: float,
    high: float,
    penalty: float,
    offset: float = 0.5,
    ties: Sequence[str] | None = None,
) -> list[bool]:
    """Relevance verdicts adjusted on borderline chunks so that utilized / relevant can express the row
    estimate ``score``.

    With one or two relevant chunks the score can only be 0, 0.5 or 1, however sure the row model is of,
    say, 0.7. Chunks are taken in order of P(relevant) (ties: the smaller ``ties`` key, then the earlier
    chunk); every chunk with
    P(relevant) >= ``high`` and the chunks ``relevant`` already marks below it stay relevant, chunks below
    ``low`` stay not relevant, and the number ``m`` of relevant chunks in between minimises
    ``(k/m - score)^2 + penalty * |m - m0|`` (``k`` the utilized count :func:`decide_utilized` gives for
    ``m``, ``m0`` the count in ``relevant``). Returns ``relevant`` unchanged when nothing is relevant.
    """
    m0 = sum(relevant)
    if m0 == 0:
        return list(relevant)
    tie = _tie(ties, len(p_rel))
    order = sorted(range(len(p_rel)), key=lambda i: (-p_rel[i], tie[i], i))
    least = max(1, min(m0, sum(1 for p in p_rel if p >= high)))
    most = max(m0, sum(1 for p in p_rel if p >= low))
    best_cost, best_m = math.inf, m0
    for m in range(least, most + 1):
        k = _count(score, m, offset)
        cost = (k / m - score) ** 2 + penalty * abs(m - m0)
        if cost < best_cost - 1e-12:
            best_cost, best_m = cost, m
    chosen = set(order[:best_m])
    return [i in chosen for i in range(len(p_rel))]


def decide_utilized(
    score: float,
    p_use: Sequence[float],
    relevant: Sequence[bool],
    offset: float = 0.5,
    ties: Sequence[str] | None = None,
) -> list[bool]:
    """Mark the ``floor(score x relevant + offset)`` relevant chunks with the highest P(utilized) utilized
    (``score`` is clamped to [0, 1]; ``offset`` 0.5 rounds to the nearest count; ties go to the smaller
    ``ties`` key, then the earlier chunk)."""
    candidates = [i for i, r in enumerate(relevant) if r]
    k = _count(score, len(candidates), offset)
    tie = _tie(ties, len(p_use))
    chosen = set(sorted(candidates, key=lambda i: (-p_use[i], tie[i], i))[:k])
    return [i in chosen for i in range(len(relevant))]


class Verdicts(NamedTuple):
    """One interaction's verdicts: per chunk relevant and utilized, and the row estimate they express
    (0.0 when nothing is relevant)."""

    relevant: list[bool]
    utilized: list[bool]
    score: float


def decide(
    decision: Decision,
    p_rel: Sequence[float],
    p_use: Sequence[float],
    estimate: Callable[[list[bool]], float],
    ties: Sequence[str] | None = None,
) -> Verdicts:
    """The judge's whole decision rule (module docstring, steps 3-4): relevance by the threshold and the
    fallback (:func:`decide_relevant`); when something is relevant, the row estimate
    ``estimate(relevant)`` (the row model, or a cached prediction when training), the borderline chunks
    following it (:func:`follow_estimate`) and the utilized chunks (:func:`decide_utilized`). The
    trainer measures decisions with this same function."""
    d = decision
    relevant = decide_relevant(p_rel, d.relevance_threshold, d.fallback_threshold, ties)
    if not any(relevant):
        return Verdicts(relevant, [False] * len(relevant), 0.0)
    score = estimate(relevant)
    relevant = follow_estimate(
        p_rel,
        relevant,
        score,
        low=d.borderline_low,
        high=d.borderline_high,
        penalty=d.count_penalty,
        offset=d.round_offset,
        ties=ties,
    )
    return Verdicts(relevant, decide_utilized(score, p_use, relevant, d.round_offset, ties), score)
