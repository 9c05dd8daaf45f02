"""Where the semantic judge's held-out score figures are lost: relevance or use (``train_semantic.py
--diagnose``; docs/judges-study.md, "Diagnosis").

From the leave-one-domain-out predictions, the natural rows' low-utilization AUROC and score RMSE are
computed four ways:

* ``shipped``: the judge's verdicts (:func:`~ctxutil_otel.judges._learned_decision.decide`);
* ``oracle relevance``: the labelled relevant chunks, then the shipped rule for use (the expected count
  of used chunks from the predicted P(utilized | relevant), rounded by the decision's offset);
* ``oracle use``: the predicted relevant chunks, then each one used exactly when labelled used (a chunk
  predicted relevant but labelled irrelevant counts as relevant and not used, as in the metric);
* ``soft``: the shipped relevance, the score as the unrounded expected share (how much the rounding
  to whole chunks costs); ``oracle rel soft``: the same with the labelled relevant chunks;
* ``use>=t``: the shipped relevance, each relevant chunk used when its P(utilized | relevant) reaches t
  (another decision rule than the rounded expected count); ``offset o``: the shipped rule with another
  round offset (the shipped one is chosen for the lowest RMSE).

Also the chunk-level AUROCs: P(relevant) over the natural rows' chunks, and P(utilized | relevant) over
their labelled-relevant chunks. A row enters the score figures when its labelled score is defined and
the predicted verdicts find some chunk relevant (as in ``measure``); ``n`` says how many did.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

Scorer = Callable[[Any, Sequence[float], Sequence[float]], "float | None"]


def _shipped(decision: Any) -> Scorer:
    from ctxutil_otel.judges._learned_decision import decide

    def score(ex: Any, rel: Sequence[float], use: Sequence[float]) -> float | None:
        relevant, utilized, _ = decide(decision, rel, use, ex.chunks)
        n = sum(relevant)
        return sum(r and u for r, u in zip(relevant, utilized, strict=True)) / n if n else None

    return score


def _oracle_relevance(decision: Any) -> Scorer:
    from ctxutil_otel.judges._learned_decision import decide_utilized, expected_used

    def score(ex: Any, rel: Sequence[float], use: Sequence[float]) -> float | None:
        relevant = list(ex.relevant)
        n = sum(relevant)
        if not n:
            return None
        utilized = decide_utilized(
            expected_used(use, relevant), use, relevant, decision.round_offset, ex.chunks
        )
        return sum(r and u for r, u in zip(relevant, utilized, strict=True)) / n

    return score


def _oracle_relevance_soft(decision: Any) -> Scorer:
    from ctxutil_otel.judges._learned_decision import expected_used

    def score(ex: Any, rel: Sequence[float], use: Sequence[float]) -> float | None:
        n = sum(ex.relevant)
        return expected_used(use, ex.relevant) / n if n else None

    return score


def _oracle_use(decision: Any) -> Scorer:
    from ctxutil_otel.judges._learned_decision import decide_relevant

    def score(ex: Any, rel: Sequence[float], use: Sequence[float]) -> float | None:
        relevant = decide_relevant(rel, decision.relevance_threshold, decision.fallback_threshold, ex.chunks)
        n = sum(relevant)
        return sum(r and u for r, u in zip(relevant, ex.utilized, strict=True)) / n if n else None

    return score


def _soft(decision: Any) -> Scorer:
    from ctxutil_otel.judges._learned_decision import decide_relevant, expected_used

    def score(ex: Any, rel: Sequence[float], use: Sequence[float]) -> float | None:
        relevant = decide_relevant(rel, decision.relevance_threshold, decision.fallback_threshold, ex.chunks)
        n = sum(relevant)
        return expected_used(use, relevant) / n if n else None

    return score


def _use_threshold(decision: Any, threshold: float) -> Scorer:
    from ctxutil_otel.judges._learned_decision import decide_relevant

    def score(ex: Any, rel: Sequence[float], use: Sequence[float]) -> float | None:
        relevant = decide_relevant(rel, decision.relevance_threshold, decision.fallback_threshold, ex.chunks)
        n = sum(relevant)
        return sum(r and u >= threshold for r, u in zip(relevant, use, strict=True)) / n if n else None

    return score


def _offset(decision: Any, offset: float) -> Scorer:
    import dataclasses

    return _shipped(dataclasses.replace(decision, round_offset=offset))


def _figures(pairs: list[tuple[float, float]]) -> tuple[float, float, int]:
    from ctxutil_otel.metric._agreement import LOW_SCORE, auroc

    low = [-p for p, y in pairs if y < LOW_SCORE]
    other = [-p for p, y in pairs if y >= LOW_SCORE]
    area = auroc(low, other)
    rmse = math.sqrt(math.fsum((p - y) ** 2 for p, y in pairs) / len(pairs)) if pairs else float("nan")
    return (area if area is not None else float("nan"), rmse, len(pairs))


def _chunk_auroc(scores: list[tuple[float, bool]]) -> float:
    from ctxutil_otel.metric._agreement import auroc

    area = auroc([s for s, y in scores if y], [s for s, y in scores if not y])
    return area if area is not None else float("nan")


def diagnose(
    examples: Sequence[Any],
    rel: Sequence[Sequence[float]],
    use: Sequence[Sequence[float]],
    decision: Any,
    keys: Sequence[str],
) -> str:
    """The diagnosis table (module docstring), one line per key of ``keys`` (a fold name or ``all``)."""
    scorers = {
        "shipped": _shipped(decision),
        "oracle rel": _oracle_relevance(decision),
        "oracle use": _oracle_use(decision),
        "soft": _soft(decision),
        "oracle rel soft": _oracle_relevance_soft(decision),
        **{f"use>={t}": _use_threshold(decision, t) for t in (0.3, 0.4, 0.5, 0.6, 0.7)},
        **{f"offset {o}": _offset(decision, o) for o in (0.3, 0.4, 0.5, 0.6, 0.7)},
    }
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    rel_chunks: dict[str, list[tuple[float, bool]]] = {}
    use_chunks: dict[str, list[tuple[float, bool]]] = {}
    for k, ex in enumerate(examples):
        if ex.kind != "natural":
            continue
        folds = [f for f in (ex.fold, "all") if f in keys]
        for f in folds:
            rel_chunks.setdefault(f, []).extend(zip(rel[k], ex.relevant, strict=True))
            use_chunks.setdefault(f, []).extend(
                (p, u) for p, r, u in zip(use[k], ex.relevant, ex.utilized, strict=True) if r
            )
        if ex.score is None:
            continue
        for name, scorer in scorers.items():
            got = scorer(ex, rel[k], use[k])
            if got is not None:
                for f in folds:
                    pairs.setdefault((name, f), []).append((got, ex.score))
    lines = [
        "diagnosis (low-util AUROC / score RMSE / rows scored; chunk AUROC of P(relevant), of P(used | "
        "relevant)):"
    ]
    for f in keys:
        cells = []
        for name in scorers:
            area, rmse, n = _figures(pairs.get((name, f), []))
            cells.append(f"{name} {area:.3f} / {rmse:.3f} / {n}")
        lines.append(
            f"  {f:12s} {'; '.join(cells)}; chunk rel {_chunk_auroc(rel_chunks.get(f, [])):.3f}, "
            f"use {_chunk_auroc(use_chunks.get(f, [])):.3f}"
        )
    return "\n".join(lines)
