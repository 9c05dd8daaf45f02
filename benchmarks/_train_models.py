"""The models of ``train_learned.py``: scikit-learn ``HistGradientBoosting*`` set-up, the chunk models'
training sets, and the export of fitted trees to the model-file format
(``ctxutil_otel.judges._learned_model``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from _train_data import (
    APPENDED,
    ECHO,
    EMPTY,
    EMPTY_REPLACED,
    NATURAL,
    PARTIAL,
    PREFIX,
    REPLACED,
    SWAPPED,
    TRUNCATED,
    WRONG_SOURCE,
    Example,
)

from ctxutil_otel.judges._learned_features import FEATURE_NAMES
from ctxutil_otel.metric._agreement import auroc

# Evidence that can only raise a probability (+1) or lower it (-1) with ``--monotonic``: more query
# coverage for P(relevant), more answer support for P(utilized | relevant); a worse rank or a larger gap to
# the interaction's best chunk (both 0 for the best) the other way. Other features are left free.
RELEVANCE_EVIDENCE = ("q_cover_global", "q_cover_local", "q_bm25", "q_bigram", "s_q_cover")
USE_EVIDENCE = (
    "a_cover", "support", "support_rel", "support_mean", "best_source_share", "ng4", "ng8", "chunk_in_answer",
    "a_exclusive", "tri_exclusive", "support_half_share", "s_in_answer", "s_drawn_share", "s_drawn_count",
    "first_support", "first_support_rel", "only_source_share",
)  # fmt: skip


def monotonic(evidence: Sequence[str]) -> list[int]:
    """scikit-learn's ``monotonic_cst`` over :data:`FEATURE_NAMES`: +1 for the ``evidence`` features,
    -1 for their ``_rank`` and ``_gap`` columns, 0 for the rest."""
    signs = {name: 1 for name in evidence}
    signs.update({f"{name}_{kind}": -1 for name in evidence for kind in ("rank", "gap")})
    return [signs.get(name, 0) for name in FEATURE_NAMES]


def hgb(args: argparse.Namespace, max_iter: int, evidence: Sequence[str] = ()) -> Any:
    """A chunk classifier (P(relevant) or P(utilized | relevant)) with the command's tree settings
    (``--monotonic``: constrained on ``evidence``, :func:`monotonic`)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        monotonic_cst=monotonic(evidence) if args.monotonic else None,
        max_iter=max_iter,
        learning_rate=args.learning_rate,
        max_leaf_nodes=args.max_leaf_nodes,
        min_samples_leaf=args.min_samples_leaf,
        l2_regularization=args.l2_regularization,
        early_stopping=False,
        random_state=args.seed,
    )


def copy_weight(ex: Example, args: argparse.Namespace) -> float:
    """Training weight of an example: ``--truncated-weight`` for truncated copies, ``--echo-weight`` for
    echo copies, else 1."""
    if ex.kind in (ECHO, PREFIX):
        return float(args.echo_weight)
    return float(args.truncated_weight) if ex.kind == TRUNCATED else 1.0


def trained_on(ex: Example, args: argparse.Namespace) -> bool:
    """Whether the models learn from ``ex`` (the off-topic copies only with ``--offtopic``; they are
    always built, so variants with and without them are measured on the same copies and folds)."""
    if ex.kind == ECHO:
        return bool(args.echo)
    if ex.kind == WRONG_SOURCE:
        return bool(args.wrong_source)
    if ex.kind == PARTIAL:
        return bool(args.partial)
    if ex.kind in (EMPTY, EMPTY_REPLACED):
        return False  # measured only: they choose the fallback for answers that draw on nothing
    if ex.kind == PREFIX:
        return True
    return args.offtopic or ex.kind not in (REPLACED, APPENDED)


def chunk_sets(
    examples: Sequence[Example], args: argparse.Namespace
) -> tuple[list[list[float]], list[int], list[list[float]], list[int], list[float]]:
    """(relevance X, y) over natural rows, their off-topic copies and (``--relevance-truncated``,
    ``--relevance-swapped``, ``--relevance-echo``) the truncated, swapped and echo ones; (utilization X,
    y, weight) over labelled-relevant chunks of all rows trained on."""
    rx: list[list[float]] = []
    ry: list[int] = []
    ux: list[list[float]] = []
    uy: list[int] = []
    uw: list[float] = []
    for ex in examples:
        if not trained_on(ex, args):
            continue
        for x, r, u in zip(ex.features, ex.relevant, ex.utilized, strict=True):
            learns = ex.kind in (NATURAL, REPLACED, APPENDED, WRONG_SOURCE)
            if (
                learns
                or (args.relevance_truncated and ex.kind in (TRUNCATED, PARTIAL))
                or (args.relevance_echo and ex.kind in (ECHO, PREFIX))
                or (args.relevance_swapped and ex.kind == SWAPPED)
            ):
                rx.append(x)
                ry.append(int(r))
            if r and (ex.kind != ECHO or args.chunk_echo):
                ux.append(x)
                uy.append(int(u))
                uw.append(copy_weight(ex, args))
    return rx, ry, ux, uy, uw


def fit_chunk_models(examples: Sequence[Example], args: argparse.Namespace) -> tuple[Any, Any]:
    rx, ry, ux, uy, uw = chunk_sets(examples, args)
    rel = hgb(args, args.max_iter, RELEVANCE_EVIDENCE).fit(rx, ry)
    weighted = any(w != 1.0 for w in uw)
    use = hgb(args, args.max_iter, USE_EVIDENCE).fit(ux, uy, sample_weight=uw if weighted else None)
    return rel, use


def export(model: Any) -> dict[str, Any]:
    """The trees of a fitted ``HistGradientBoostingClassifier`` in the model-file format (link ``logit``:
    the raw sum is the log-odds)."""
    trees = []
    for iteration in model._predictors:  # one predictor per iteration (binary / regression)
        (predictor,) = iteration
        nodes = []
        for node in predictor.nodes:
            if node["is_leaf"]:
                nodes.append([float(node["value"])])
            else:
                if node["is_categorical"]:
                    raise SystemExit("categorical splits are not supported by the exporter")
                nodes.append(
                    [
                        int(node["feature_idx"]),
                        float(node["num_threshold"]),
                        int(node["left"]),
                        int(node["right"]),
                    ]
                )
        trees.append(nodes)
    baseline = float(model._baseline_prediction.ravel()[0])
    return {"baseline": baseline, "link": "logit", "trees": trees}


def raw(model: Any, x: list[list[float]]) -> list[float]:
    out = model._raw_predict(x) if hasattr(model, "_raw_predict") else model.predict(x)
    return [float(v) for v in out.ravel()]


def best_f1_threshold(probs: Sequence[float], labels: Sequence[bool]) -> float:
    best = (-1.0, 0.5)
    for step in range(5, 96):
        t = step / 100
        tp = sum(1 for p, y in zip(probs, labels, strict=True) if p >= t and y)
        fp = sum(1 for p, y in zip(probs, labels, strict=True) if p >= t and not y)
        fn = sum(1 for p, y in zip(probs, labels, strict=True) if p < t and y)
        f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
        if f1 > best[0] + 1e-12:
            best = (f1, t)
    return best[1]


def ablate(examples: Sequence[Example], names: str) -> None:
    """Set the comma-separated chunk features ``names`` to 0 in every example (the trees cannot split on
    a constant): to measure a variant without some features, out of fold, on the same copies and folds."""
    columns = [FEATURE_NAMES.index(name) for name in names.split(",") if name]
    for ex in examples:
        for x in ex.features:
            for c in columns:
                x[c] = 0.0


def chunk_aurocs(natural: Sequence[Example], oof_rel: list[list[float]], oof_use: list[list[float]]) -> str:
    """Out-of-fold chunk AUROCs of the chunk models on the natural rows: P(relevant) over all chunks
    against the relevance labels, P(utilized | relevant) over the labelled-relevant chunks against the
    utilization labels: the chunk models compared directly, before any decision."""
    rel_pos: list[float] = []
    rel_neg: list[float] = []
    use_pos: list[float] = []
    use_neg: list[float] = []
    for k, ex in enumerate(natural):
        for p_rel, p_use, r, u in zip(oof_rel[k], oof_use[k], ex.relevant, ex.utilized, strict=True):
            (rel_pos if r else rel_neg).append(p_rel)
            if r:
                (use_pos if u else use_neg).append(p_use)
    rel_area, use_area = auroc(rel_pos, rel_neg), auroc(use_pos, use_neg)
    return (
        f"  out-of-fold chunk AUROC: P(relevant) {rel_area if rel_area is not None else float('nan'):.4f} "
        f"({len(rel_pos) + len(rel_neg)} chunks), P(utilized | relevant) "
        f"{use_area if use_area is not None else float('nan'):.4f} ({len(use_pos) + len(use_neg)} chunks)"
    )
