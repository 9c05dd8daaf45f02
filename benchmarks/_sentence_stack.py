"""Sentence-level supervision for the semantic judge's relevance model (``train_semantic.py
--sentence-model``; docs/judges-study.md).

A (query, sentence) model learns RAGBench's sentence labels (``relevant_sentence_keys`` over
``documents_sentences``, mapped onto the judge's own sentence split by character overlap) from
:func:`~_sentence_features.sentence_rows`; the chunk's relevance row then gets its
sentences' scores (:func:`~_sentence_features.stack_columns`).

No leakage: the chunk trees must learn from sentence scores as unseen as at run time. For a held-out fold
F the sentence model is trained on the RAGBench folds other than F; the chunk trees' training rows of a
fold G get scores from a sentence model trained without F and G. The final model's training rows of
RAGBench fold G get scores from a sentence model trained without G (seed-style rows, which have no sentence
labels and never train it: the model trained on all RAGBench rows, as at run time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Key = tuple[str, tuple[str, ...]]


def _spans(text: str, pieces: Sequence[str]) -> list[tuple[int, int]]:
    """Character spans of ``pieces`` in ``text`` found in order (a piece not found: an empty span)."""
    out = []
    at = 0
    for p in pieces:
        s = p.strip()
        k = text.find(s, at) if s else -1
        if k < 0:
            k = text.find(s) if s else -1
        if k < 0:
            out.append((0, 0))
        else:
            out.append((k, k + len(s)))
            at = k + len(s)
    return out


def sentence_labels(chunk: str, parts: Sequence[str], labelled: Sequence[tuple[str, bool]]) -> list[bool]:
    """Per judge sentence (``parts`` of ``chunk``): relevant when at least half its characters lie in
    labelled-relevant RAGBench sentences (``labelled``: their texts and labels, in order)."""
    theirs = _spans(chunk, [t for t, _ in labelled])
    mask = bytearray(len(chunk))
    for (a, b), (_, rel) in zip(theirs, labelled, strict=True):
        if rel:
            mask[a:b] = b"\x01" * (b - a)
    out = []
    for a, b in _spans(chunk, parts):
        out.append(b > a and 2 * sum(mask[a:b]) >= b - a)
    return out


def _key(ex: Any, side: str = "relevance") -> Any:
    return (ex.query, tuple(ex.chunks)) if side == "relevance" else (ex.query, ex.answer, tuple(ex.chunks))


def _rows(ex: Any, side: str, weights: Any, embedder: Any) -> list[list[list[float]]]:
    from _sentence_features import sentence_rows, use_sentence_rows

    from ctxutil_otel.judges._semantic_features import _split

    parts = [_split(c) for c in ex.chunks]
    flat = [s for p in parts for s in p]
    n = len(ex.chunks)
    if side == "relevance":
        v = embedder.embed([ex.query, *ex.chunks, *flat])
        return sentence_rows(ex.query, parts, v[0], v[1 + n :], v[1 : 1 + n], weights)
    answer_parts = _split(ex.answer) if ex.answer.strip() else []
    v = embedder.embed([ex.query, ex.answer, *answer_parts, *flat])
    m = len(answer_parts)
    return use_sentence_rows(ex.query, ex.answer, parts, v[0], v[1], v[2 : 2 + m], v[2 + m :], weights)


def build(
    examples: Sequence[Any],
    rows: Sequence[dict[str, Any]],
    weights: Any,
    embedder: Any,
    side: str = "relevance",
) -> tuple[dict[Any, list[list[list[float]]]], dict[Any, tuple[str, list[bool]]]]:
    """Sentence rows per distinct interaction of ``examples`` (for ``side`` ``relevance``: the query and
    the chunks; ``use``: with the answer), and the sentence labels (with the fold) of the natural
    RAGBench rows (``relevant_sentence_keys`` or ``utilized_sentence_keys``)."""
    from ctxutil_otel.judges._semantic_features import _split

    feats: dict[Any, list[list[list[float]]]] = {}
    labels: dict[Any, tuple[str, list[bool]]] = {}
    label_key = "relevant_sentence_keys" if side == "relevance" else "utilized_sentence_keys"
    for ex in examples:
        key = _key(ex, side)
        if key not in feats:
            feats[key] = _rows(ex, side, weights, embedder)
        row = rows[ex.row_index]
        if ex.kind == "natural" and "documents_sentences" in row and key not in labels:
            positive = set(row[label_key])
            flat_labels: list[bool] = []
            for c in ex.chunks:
                k = row["retrieved_content"].index(c)
                labelled = [(t, sk in positive) for sk, t in row["documents_sentences"][k]]
                flat_labels += sentence_labels(c, _split(c), labelled)
            labels[key] = (ex.fold, flat_labels)
    return feats, labels


def _model(args: Any) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier

    return HistGradientBoostingClassifier(
        max_iter=args.sentence_iter,
        learning_rate=0.1,
        max_leaf_nodes=args.sentence_leaves,
        min_samples_leaf=40,
        l2_regularization=1.0,
        early_stopping=False,
        random_state=args.seed,
    )


def fit_sentence_models(
    feats: dict[Key, list[list[list[float]]]],
    labels: dict[Key, tuple[str, list[bool]]],
    exclusions: Sequence[frozenset[str]],
    args: Any,
) -> dict[frozenset[str], Any]:
    """One sentence model per set of excluded RAGBench folds."""
    out = {}
    for excluded in exclusions:
        xs: list[list[float]] = []
        ys: list[bool] = []
        for key, (fold, lab) in labels.items():
            if fold in excluded:
                continue
            xs += [r for chunk in feats[key] for r in chunk]
            ys += lab
        out[excluded] = _model(args).fit(xs, ys)
    return out


def predict(model: Any, feats: list[list[list[float]]]) -> list[list[float]]:
    flat = [r for chunk in feats for r in chunk]
    p = [float(x) for x in model.predict_proba(flat)[:, 1]] if flat else []
    out = []
    at = 0
    for chunk in feats:
        out.append(p[at : at + len(chunk)])
        at += len(chunk)
    return out


def sentence_auroc(
    models: dict[frozenset[str], Any],
    feats: dict[Key, list[list[list[float]]]],
    labels: dict[Key, tuple[str, list[bool]]],
) -> dict[str, float]:
    """Held-out sentence AUROC per RAGBench fold (the model trained without it)."""
    from ctxutil_otel.metric._agreement import auroc

    out = {}
    for fold in sorted({f for f, _ in labels.values()}):
        model = models[frozenset({fold})]
        pos: list[float] = []
        neg: list[float] = []
        for key, (f, lab) in labels.items():
            if f != fold:
                continue
            p = [x for chunk in predict(model, feats[key]) for x in chunk]
            pos += [x for x, y in zip(p, lab, strict=True) if y]
            neg += [x for x, y in zip(p, lab, strict=True) if not y]
        out[fold] = auroc(pos, neg) or float("nan")
    return out
