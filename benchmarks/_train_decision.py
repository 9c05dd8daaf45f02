"""How ``train_learned.py`` turns probabilities into verdicts, and the out-of-fold figures of that
decision.

The judge marks chunks relevant by a threshold on P(relevant) (best out-of-fold relevance F1) with a
fallback to the most likely chunk, then marks the ``floor(expected + 0.5)`` most likely used relevant
chunks utilized, ``expected`` the sum of their P(utilized | relevant)
(:func:`~ctxutil_otel.judges._learned_decision.decide`). :func:`outcome`, :func:`report` and
:func:`by_subset` measure it with the judge's own rule on out-of-fold probabilities: the guide for
choosing between training variants without looking at dev (``docs/judges.md``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from _train_data import EMPTY, EMPTY_REPLACED, NATURAL, REPLACED, SWAPPED, Example

from ctxutil_otel.judges._learned_decision import Verdicts, decide, decide_relevant
from ctxutil_otel.judges._learned_model import Decision

ROUND_OFFSET = 0.5  # the nearest whole count of used chunks


@dataclass(frozen=True)
class Outcome:
    """Out-of-fold figures of one decision on the natural training rows."""

    rmse: float
    relevance_f1: float
    utilization_f1: float
    pooled: float
    labelled_pooled: float
    used_precision: float
    """Among the labelled-relevant chunks: of those marked used (relevant and utilized), the share used."""
    used_recall: float
    """Among the labelled-relevant chunks: of the used ones, the share marked used."""
    ignored_marked_used: float
    """Among the labelled-relevant chunks: of those the answer did not use, the share marked used."""


def _f1(tp: int, fp: int, fn: int) -> float:
    return 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0


def outcome(
    natural: Sequence[Example],
    oof_rel: Sequence[Sequence[float]],
    oof_use: Sequence[Sequence[float]],
    decision: Decision,
) -> Outcome:
    errors: list[float] = []
    rtp = rfp = rfn = utp = ufp = ufn = utn = used = relevant_total = labelled_used = labelled_relevant = 0
    for k, ex in enumerate(natural):
        relevant, utilized, _ = _verdicts(k, oof_rel, oof_use, decision)
        for r, u, lr, lu in zip(relevant, utilized, ex.relevant, ex.utilized, strict=True):
            rtp += r and lr
            rfp += r and not lr
            rfn += lr and not r
            if lr:
                hit = r and u
                utp += hit and lu
                ufp += hit and not lu
                ufn += lu and not hit
                utn += not hit and not lu
        used += sum(r and u for r, u in zip(relevant, utilized, strict=True))
        relevant_total += sum(relevant)
        labelled_used += sum(r and u for r, u in zip(ex.relevant, ex.utilized, strict=True))
        labelled_relevant += sum(ex.relevant)
        if ex.score is not None and any(relevant):
            predicted = sum(r and u for r, u in zip(relevant, utilized, strict=True)) / sum(relevant)
            errors.append((predicted - ex.score) ** 2)
    return Outcome(
        rmse=math.sqrt(math.fsum(errors) / len(errors)) if errors else 0.0,
        relevance_f1=_f1(rtp, rfp, rfn),
        utilization_f1=_f1(utp, ufp, ufn),
        pooled=used / relevant_total if relevant_total else 0.0,
        labelled_pooled=labelled_used / labelled_relevant if labelled_relevant else 0.0,
        used_precision=utp / (utp + ufp) if utp + ufp else 0.0,
        used_recall=utp / (utp + ufn) if utp + ufn else 0.0,
        ignored_marked_used=ufp / (ufp + utn) if ufp + utn else 0.0,
    )


def choose_decision(
    natural: Sequence[Example],
    oof_rel: Sequence[Sequence[float]],
    oof_use: Sequence[Sequence[float]],
    threshold: float,
    fallback: float,
    nothing_fallback: float,
) -> Decision:
    """The :class:`Decision` of ``threshold`` and the fallbacks with the nearest-count rounding (prints its
    out-of-fold figures)."""
    chosen = Decision(
        relevance_threshold=threshold,
        fallback_threshold=fallback,
        round_offset=ROUND_OFFSET,
        nothing_fallback=nothing_fallback,
    )
    o = outcome(natural, oof_rel, oof_use, chosen)
    print(
        f"  decision {chosen.as_dict()}: out-of-fold train RMSE {o.rmse:.4f}, relevance F1 "
        f"{o.relevance_f1:.4f}, utilization F1 {o.utilization_f1:.4f}, pooled {o.pooled:.3f} (labelled "
        f"{o.labelled_pooled:.3f}); relevant chunks: used P {o.used_precision:.3f} R {o.used_recall:.3f}, "
        f"ignored marked used {o.ignored_marked_used:.3f}"
    )
    return chosen


def _verdicts(
    k: int,
    oof_rel: Sequence[Sequence[float]],
    oof_use: Sequence[Sequence[float]],
    decision: Decision,
) -> Verdicts:
    """Example ``k``'s verdicts: :func:`~ctxutil_otel.judges._learned_decision.decide`, the judge's own
    rule, on its out-of-fold probabilities."""
    return decide(decision, oof_rel[k], oof_use[k])


def _pooled(verdicts: Sequence[tuple[list[bool], list[bool]]]) -> float:
    used = sum(r and u for rel, use in verdicts for r, u in zip(rel, use, strict=True))
    relevant = sum(sum(rel) for rel, _ in verdicts)
    return used / relevant if relevant else 0.0


def report(
    examples: Sequence[Example],
    oof_rel: Sequence[Sequence[float]],
    oof_use: Sequence[Sequence[float]],
    decision: Decision,
) -> str:
    """The issue-11 measures of a decision, out of fold on train, as one line: low-score AUROC of the
    verdicts' scores and of the continuous expected share (expected used / relevant; natural rows), that
    share's RMSE, the
    pooled utilization of the swapped copies (``--perturb swap``) and its fall when every multi-sentence
    answer is replaced by its one-sentence copy (``--perturb truncate``). The guide for choosing between
    training variants without looking at dev (``docs/judges.md``)."""
    from ctxutil_otel.metric._agreement import LOW_SCORE, auroc

    natural: dict[int, tuple[list[bool], list[bool]]] = {}
    swapped: list[tuple[list[bool], list[bool]]] = []
    echoed: list[tuple[list[bool], list[bool]]] = []
    prefixed: list[tuple[list[bool], list[bool]]] = []
    cut_once: dict[int, tuple[list[bool], list[bool]]] = {}
    appended: dict[int, dict[int, tuple[list[bool], list[bool]]]] = {}
    replaced_na: list[bool] = []
    wrong: list[tuple[list[bool], list[bool]]] = []
    partial: list[tuple[float, float]] = []  # (predicted, labelled) score of the partial copies
    empty_na: tuple[list[bool], list[bool]] = ([], [])  # not applicable? empty answer: own / other chunks
    low: list[float] = []
    other: list[float] = []
    low_c: list[float] = []
    other_c: list[float] = []
    squared: list[float] = []
    for k, ex in enumerate(examples):
        relevant, utilized, expected = _verdicts(k, oof_rel, oof_use, decision)
        got = (relevant, utilized)
        if ex.kind == "swapped":
            swapped.append(got)
        elif ex.kind in ("echo", "prefix"):
            (echoed if ex.kind == "echo" else prefixed).append(got)
        elif ex.kind == "truncated":
            cut_once.setdefault(ex.row_index, got)  # the one-sentence copy comes first
        elif ex.kind == "replaced":
            replaced_na.append(not any(got[0]))
        elif ex.kind == "wrong_source":
            wrong.append(got)
        elif ex.kind in (EMPTY, EMPTY_REPLACED):
            rel = decide_relevant(oof_rel[k], decision.relevance_threshold, decision.nothing_fallback)
            if ex.kind == EMPTY_REPLACED:
                empty_na[1].append(not any(rel))
            elif ex.score is not None:
                empty_na[0].append(not any(rel))
        elif ex.kind == "partial":
            if ex.score is not None and any(got[0]):
                partial.append((sum(r and u for r, u in zip(*got, strict=True)) / sum(got[0]), ex.score))
        elif ex.kind == "appended":
            appended.setdefault(ex.appended, {})[ex.row_index] = got
        else:
            natural[ex.row_index] = got
            if ex.score is not None and any(got[0]):
                predicted = sum(r and u for r, u in zip(*got, strict=True)) / sum(got[0])
                estimate = expected / sum(got[0])
                (low if ex.score < LOW_SCORE else other).append(-predicted)
                (low_c if ex.score < LOW_SCORE else other_c).append(-estimate)
                squared.append((estimate - ex.score) ** 2)
    pooled = _pooled(list(natural.values()))
    truncated = _pooled([cut_once.get(i, v) for i, v in natural.items()])
    area = auroc(low, other)
    area_c = auroc(low_c, other_c)
    firsts = examples[: len(natural)]  # the natural rows come first
    nothing = [ex.row_index for ex in firsts if ex.score is None]
    na_natural = sum(1 for i in nothing if not any(natural[i][0])) / len(nothing) if nothing else 0.0
    scored_na = sum(1 for ex in firsts if ex.score is not None and not any(natural[ex.row_index][0]))
    invariance = "; ".join(
        f"+{n} off-topic: {_invariance(natural, copies)}" for n, copies in sorted(appended.items())
    )
    return (
        f"low-score AUROC {area if area is not None else float('nan'):.4f}, swap pooled "
        f"{_pooled(swapped):.3f}, echo pooled (models alone) {_pooled(echoed):.3f}"
        + (f", first-words pooled {_pooled(prefixed):.3f}" if prefixed else "")
        + f", truncate drop {pooled - truncated:.3f}; "
        "continuous expected share: "
        f"RMSE {math.sqrt(math.fsum(squared) / len(squared)) if squared else 0.0:.4f}, "
        f"AUROC {area_c if area_c is not None else float('nan'):.4f}\n"
        f"  not applicable on rows with no labelled-relevant chunk {na_natural:.3f} ({len(nothing)} rows), "
        f"on replaced-chunk copies {sum(replaced_na) / len(replaced_na) if replaced_na else 0.0:.3f}; "
        f"scored rows called not applicable {scored_na}\n  {invariance}\n"
        f"  empty answer (nothing_fallback {decision.nothing_fallback:.2f}): not applicable on "
        f"{sum(empty_na[0])} of {len(empty_na[0])} rows with a labelled-relevant chunk, on "
        f"{sum(empty_na[1])} of {len(empty_na[1])} with another row's chunks\n"
        f"  partial answers (the sentences drawing on one of several used chunks, {len(partial)} copies): "
        f"mean score {math.fsum(p for p, _ in partial) / len(partial) if partial else 0.0:.3f} (labelled "
        f"{math.fsum(y for _, y in partial) / len(partial) if partial else 0.0:.3f})\n"
        f"  wrong source (answer copied from an appended off-topic chunk): pooled {_pooled(wrong):.3f}, "
        f"the copied chunk called relevant {sum(r[-1] for r, _ in wrong) / len(wrong) if wrong else 0.0:.3f}"
    )


def by_subset(
    examples: Sequence[Example],
    oof_rel: Sequence[Sequence[float]],
    oof_use: Sequence[Sequence[float]],
    decision: Decision,
) -> str:
    """:func:`outcome` and :func:`report` of each subset's rows and their copies, a block per subset (with
    ``--folds-by subset`` these are the leave-one-subset-out figures: each subset judged by models that
    never saw it)."""
    lines: list[str] = []
    for name in sorted({ex.subset for ex in examples}):
        keep = [k for k, ex in enumerate(examples) if ex.subset == name]
        sub = [examples[k] for k in keep]
        rel = [oof_rel[k] for k in keep]
        use = [oof_use[k] for k in keep]
        naturals = [ex for ex in sub if ex.kind == "natural"]
        o = outcome(naturals, rel, use, decision)
        lines.append(
            f"  [{name}] {len(naturals)} rows: RMSE {o.rmse:.4f}, relevance F1 {o.relevance_f1:.4f}, "
            f"utilization F1 {o.utilization_f1:.4f}, pooled {o.pooled:.3f} (labelled "
            f"{o.labelled_pooled:.3f}); relevant chunks: used P {o.used_precision:.3f} R "
            f"{o.used_recall:.3f}, ignored marked used {o.ignored_marked_used:.3f}\n    "
            f"{report(sub, rel, use, decision).splitlines()[0]}"
        )
    return "\n".join(lines)


def _score(verdicts: tuple[list[bool], list[bool]], n: int) -> float | None:
    relevant, utilized = verdicts[0][:n], verdicts[1][:n]
    total = sum(verdicts[0])
    return sum(r and u for r, u in zip(relevant, utilized, strict=True)) / total if total else None


def _invariance(
    natural: dict[int, tuple[list[bool], list[bool]]], copies: dict[int, tuple[list[bool], list[bool]]]
) -> str:
    """Share of rows scored on the natural row whose score changes with the off-topic chunks appended,
    the mean change, and the share of appended chunks called relevant."""
    changed = 0
    deltas: list[float] = []
    scored = 0
    extra_relevant = extra = 0
    for i, got in copies.items():
        n = len(natural[i][0])
        extra += len(got[0]) - n
        extra_relevant += sum(got[0][n:])
        before = _score(natural[i], n)
        if before is None:
            continue
        scored += 1
        after = _score(got, len(got[0]))
        if after != before:
            changed += 1
        deltas.append((after if after is not None else 0.0) - before)
    return (
        f"score changed on {changed / scored if scored else 0.0:.3f} of {scored} scored rows, mean change "
        f"{math.fsum(deltas) / len(deltas) if deltas else 0.0:+.4f}, off-topic chunks relevant "
        f"{extra_relevant / extra if extra else 0.0:.3f}"
    )


def choose_fallback(
    examples: Sequence[Example],
    oof_rel: list[list[float]],
    threshold: float,
    kinds: Sequence[str] = (NATURAL, SWAPPED, REPLACED),
    name: str = "fallback",
) -> float:
    """The fallback probability that best tells, out of fold, the rows that retrieved something relevant
    (labelled) from those that did not: accuracy of "some chunk is relevant" over the examples of
    ``kinds``. By default the natural rows, the swapped-answer copies (their chunks keep their relevance:
    an answer that ignores relevant context is a 0.0, never "not applicable") and the replaced-chunk copies
    (nothing in them is relevant), about as many of each; for ``nothing_fallback`` the empty-answer copies
    and their replaced-chunk twins. Ties: the lower. Prints the grid, each line starting with ``name``."""
    judged = [(k, any(ex.relevant)) for k, ex in enumerate(examples) if ex.kind in kinds]
    best = (-1.0, threshold)
    for step in range(5, round(threshold * 100) + 1, 5):
        fallback = min(step / 100, threshold)
        hits = sum(1 for k, has in judged if any(decide_relevant(oof_rel[k], threshold, fallback)) == has)
        accuracy = hits / len(judged) if judged else 0.0
        print(f"  {name} {fallback:.2f}: applicable-or-not accuracy {accuracy:.4f} out of fold")
        if accuracy > best[0] + 1e-12:
            best = (accuracy, fallback)
    return best[1]
