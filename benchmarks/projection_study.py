"""A tried variant of the semantic judge (docs/judges-study.md): a contrastively trained linear projection of
WordLlama's vectors as extra relevance features, measured leave one domain out.

    .venv/bin/pip install -e '.[train,semantic]' torch
    .venv/bin/python benchmarks/projection_study.py --dim 256 --asym     # the full leave-one-domain-out run
    .venv/bin/python benchmarks/projection_study.py --baseline           # the same pipeline, no projection
    .venv/bin/python benchmarks/projection_study.py --only-proj-eval     # the projected cosines' AUROCs only

(``CTXUTIL_SEMANTIC_CACHE=.cache/examples.pkl`` reuses train_semantic.py's cached feature rows.) Measured
worse or no better than the shipped model (docs/judges-study.md), so nothing here ships.

For each held-out fold F a projection W (256 x ``--dim``, initialised to the identity's first columns) is
trained on the other folds' (query, sentence) pairs: RAGBench's sentence labels (``relevant_sentence_keys``
over ``documents_sentences``) and the chunk labels (RAGBench chunks and the seed-style training set's
chunks), with an InfoNCE loss over each interaction's own sentences or chunks (the hard negatives share the
query's topic), plus ``--reg`` times ||W - I||^2. Its cosines cos(Wq, Wc) and the best cos(Wq, Ws) over the
chunk's sentences, each with rank, gap and z-score within the interaction, are appended to the relevance rows.
The training folds' own rows get these features from projections that never saw them (W trained on the
folds other than F and their own fold), so the trees learn from held-out cosines as they meet at run time.
The utilization model and the decision rules are train_semantic.py's own.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
import math
import pickle
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_semantic as ts  # noqa: E402


def _unit(x: Any) -> Any:
    import numpy as np

    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(n, 1e-9)


def pair_lists(rows: list[dict[str, Any]], embed: Any, cap: int, rng: random.Random) -> list[tuple]:
    """Per row: (fold, query vector, candidate vectors, labels) for its sentences and for its chunks."""
    import numpy as np

    out = []
    for r in rows:
        fold = ts.fold_name(r)
        q = embed([r["query"]])[0]
        lists: list[tuple[list[str], list[bool]]] = []
        if "documents_sentences" in r:
            keys = set(r["relevant_sentence_keys"])
            sents = [(t, k in keys) for doc in r["documents_sentences"] for k, t in doc if t.strip()]
            lists.append(([t for t, _ in sents], [y for _, y in sents]))
        lists.append((list(r["retrieved_content"]), [bool(lab["relevant"]) for lab in r["chunk_labels"]]))
        for texts, ys in lists:
            if not any(ys) or all(ys):
                continue
            idx = list(range(len(texts)))
            if len(idx) > cap:
                pos = [i for i in idx if ys[i]]
                neg = [i for i in idx if not ys[i]]
                rng.shuffle(pos)
                rng.shuffle(neg)
                idx = pos[: cap // 2] + neg[: cap - min(len(pos), cap // 2)]
                idx = idx[:cap]
            out.append((fold, q, embed([texts[i] for i in idx]), np.array([ys[i] for i in idx], dtype=bool)))
    return out


def train_projection(lists: list[tuple], args: argparse.Namespace, seed: int) -> Any:
    import numpy as np
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    n = len(lists)
    width = max(len(x[3]) for x in lists)
    dim = 256
    q = np.zeros((n, dim), dtype=np.float32)
    s = np.zeros((n, width, dim), dtype=np.float32)
    mask = np.zeros((n, width), dtype=bool)
    pos = np.zeros((n, width), dtype=bool)
    for i, (_, qv, sv, ys) in enumerate(lists):
        q[i] = qv
        s[i, : len(ys)] = sv
        mask[i, : len(ys)] = True
        pos[i, : len(ys)] = ys
    Q, S, M, P = map(torch.from_numpy, (q, s, mask, pos))
    eye = torch.eye(dim, args.dim)
    W = torch.nn.Parameter(eye.clone())
    V = torch.nn.Parameter(eye.clone()) if args.asym else W  # the query's own map (--asym)
    opt = torch.optim.Adam([W, V] if args.asym else [W], lr=args.lr)
    g = torch.Generator().manual_seed(seed)
    for _ in range(args.epochs):
        order = torch.randperm(n, generator=g)
        for b in range(0, n, args.batch):
            ix = order[b : b + args.batch]
            qp = torch.nn.functional.normalize(Q[ix] @ V, dim=-1)
            sp = torch.nn.functional.normalize(S[ix] @ W, dim=-1)
            logits = torch.einsum("bd,bld->bl", qp, sp) / args.tau
            logits = logits.masked_fill(~M[ix], -1e4)
            all_ = torch.logsumexp(logits, dim=1)
            good = torch.logsumexp(logits.masked_fill(~P[ix], -1e4), dim=1)
            loss = (all_ - good).mean() + args.reg * (((W - eye) ** 2).sum() + ((V - eye) ** 2).sum())
            opt.zero_grad()
            loss.backward()
            opt.step()
    if args.asym:
        return np.stack([V.detach().numpy().copy(), W.detach().numpy().copy()])
    return np.stack([W.detach().numpy().copy()] * 2)


def _ranked(values: list[float]) -> tuple[list[float], list[float], list[float]]:
    from ctxutil_otel.judges._semantic_features import _ranked as ranked

    return ranked(values)


PROJ_FEATURES = (
    "proj_q_chunk",
    "proj_q_sent",
    "proj_q_chunk_rank",
    "proj_q_sent_rank",
    "proj_q_chunk_gap",
    "proj_q_sent_gap",
    "proj_q_chunk_z",
    "proj_q_sent_z",
)


def proj_rows(vecs: tuple, W: Any) -> list[list[float]]:
    """The projected features of one example's chunks (PROJ_FEATURES per chunk)."""
    q, chunks, sents = vecs
    Wq, Ws = (W, W) if W.ndim == 2 else (W[0], W[1])
    qp = _unit(q @ Wq)
    pc = [float(x) for x in _unit(chunks @ Ws) @ qp]
    ps = [float((_unit(s @ Ws) @ qp).max()) for s in sents]
    (rc, gc, zc), (rs, gs, zs) = _ranked(pc), _ranked(ps)
    return [list(t) for t in zip(pc, ps, rc, rs, gc, gs, zc, zs, strict=True)]


def load_examples(rows: list[dict[str, Any]], args: argparse.Namespace) -> list[Any]:
    """train_semantic.py's examples and feature rows (from ``CTXUTIL_SEMANTIC_CACHE`` when it names a pickle
    that script wrote, else computed: several minutes)."""
    cache = os.environ.get("CTXUTIL_SEMANTIC_CACHE")
    if cache and Path(cache).is_file():
        import __main__

        __main__.Variant = ts.Variant  # type: ignore[attr-defined]  # pickled by train_semantic.py as __main__
        with open(cache, "rb") as handle:
            examples: list[Any] = pickle.load(handle)
        for ex in examples:
            ex.weight = args.seed_weight
        return examples
    from train_learned import zipf_table

    from ctxutil_otel.judges._learned_features import WordWeights

    examples = ts.variants(rows, random.Random(args.seed), args.seed_weight)
    ts.featurise(examples, WordWeights.from_zipf(zipf_table(25_000)))
    return examples


TREES = ts.default_args()
"""train_semantic.py's defaults (the shipped model's parameters)."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dim", type=int, default=128, help="projected dimensions")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch", type=int, default=64, help="interactions per step")
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--tau", type=float, default=0.05, help="InfoNCE temperature")
    parser.add_argument("--reg", type=float, default=0.0, help="weight of ||W - I||^2")
    parser.add_argument("--cap", type=int, default=48, help="candidates per list (positives kept first)")
    parser.add_argument("--baseline", action="store_true", help="no projected features (the shipped model)")
    parser.add_argument("--asym", action="store_true", help="a second map for the query")
    parser.add_argument("--in-sample", action="store_true", help="AUROCs on the training folds instead")
    parser.add_argument("--only-proj-eval", action="store_true", help="print the projection's AUROCs only")
    return parser.parse_args()


class Projections:
    """Projections trained without given folds (cached), and each example's vectors."""

    def __init__(self, lists: list[tuple], cli: argparse.Namespace) -> None:
        self.lists, self.cli = lists, cli
        self.cache: dict[frozenset[str], Any] = {}

    def without(self, excluded: frozenset[str]) -> Any:
        if excluded not in self.cache:
            t = time.perf_counter()
            self.cache[excluded] = train_projection(
                [x for x in self.lists if x[0] not in excluded], self.cli, 7
            )
            print(f"  W without {sorted(excluded)} in {time.perf_counter() - t:.0f} s", flush=True)
        return self.cache[excluded]


def _area(xs: list[float], ys: list[bool]) -> float:
    from ctxutil_otel.metric._agreement import auroc

    pairs = list(zip(xs, ys, strict=True))
    return auroc([x for x, y in pairs if y], [x for x, y in pairs if not y]) or 0.0


def report_cosines(examples: list[Any], vecs: dict[int, tuple], folds: list[str], proj: Projections) -> None:
    """Zero-shot vs projected relevance AUROC per held-out fold (natural rows' chunks)."""
    import numpy as np

    eye = np.eye(256, dtype=np.float32)
    for fold in folds:
        W = proj.without(frozenset({fold}))
        base: list[list[float]] = []
        new: list[list[float]] = []
        ys: list[bool] = []
        for k, v in vecs.items():
            ex = examples[k]
            if (ex.fold != fold) != proj.cli.in_sample or ex.kind != "natural":
                continue
            base += proj_rows(v, eye)
            new += proj_rows(v, W)
            ys += ex.relevant
        print(
            f"{fold}: relevance AUROC q-chunk zero-shot {_area([r[0] for r in base], ys):.3f} projected "
            f"{_area([r[0] for r in new], ys):.3f}; q-best-sentence {_area([r[1] for r in base], ys):.3f} "
            f"-> {_area([r[1] for r in new], ys):.3f}",
            flush=True,
        )


def report_loso(
    examples: list[Any],
    vecs: dict[int, tuple],
    oof_rel: list[list[float]],
    oof_use: list[list[float]],
    folds: list[str],
    title: str,
) -> None:
    """Fill the answer-only copies' relevance from their source example, choose the decision on the pooled
    out-of-fold predictions and print the leave-one-domain-out figures under ``title``."""
    # Copies that change only the answer share their source example's chunks, so its relevance predictions.
    by_row = {(ex.row_index, ex.kind): k for k, ex in enumerate(examples) if k in vecs}
    for k, ex in enumerate(examples):
        if k not in vecs:
            oof_rel[k] = oof_rel[
                by_row[(ex.row_index, "appended" if ex.kind == "wrong_source" else "natural")]
            ]
    decision = ts.choose_decision(examples, oof_rel, oof_use)
    print(f"decision: {decision.as_dict()}")
    nat = [ex.score for ex in examples if ex.kind == "natural" and ex.score is not None]
    figures = ts.measure(examples, oof_rel, oof_use, decision, [*folds, "all"])
    print(f"leave one domain out, {title}:")
    for key in [*folds, "all"]:
        print(f"  {key:10s} {figures[key].line(math.fsum(nat) / len(nat))}")


def loso(examples: list[Any], vecs: dict[int, tuple], folds: list[str], proj: Projections) -> None:
    """train_semantic.py's leave-one-domain-out figures with the projected features in the relevance rows:
    the held-out fold's from W without it, each training fold's from W without both."""
    started = time.perf_counter()
    base_rel = {k: list(map(list, examples[k].rel_rows)) for k in vecs}
    oof_rel: list[list[float]] = [[] for _ in examples]
    oof_use: list[list[float]] = [[] for _ in examples]
    for fold in folds:
        for k, v in vecs.items():
            ex = examples[k]
            extra = (
                [[] for _ in ex.chunks]
                if proj.cli.baseline
                else proj_rows(v, proj.without(frozenset({fold, ex.fold})))
            )
            ex.rel_rows = [a + b for a, b in zip(base_rel[k], extra, strict=True)]
        rel, use = ts.fit([ex for ex in examples if ex.fold != fold], TREES)
        for k, ex in enumerate(examples):
            if ex.fold == fold:
                oof_use[k] = [float(p) for p in use.predict_proba(ex.use_rows)[:, 1]]
                if k in vecs:
                    oof_rel[k] = [float(p) for p in rel.predict_proba(ex.rel_rows)[:, 1]]
        print(f"fold {fold} done at {time.perf_counter() - started:.0f} s", flush=True)
    report_loso(examples, vecs, oof_rel, oof_use, folds, f"projection {vars(proj.cli)}")


def main() -> int:
    cli = parse_args()
    from ctxutil_otel.judges._semantic_features import _split

    started = time.perf_counter()
    rows = ts.load_rows(
        [ts.DATA / "ragbench_train.jsonl", ts.DATA / "ragbench_dev.jsonl", ts.SEED_STYLE_TRAIN]
    )
    ts.relabel_non_answers(rows)
    examples = load_examples(rows, TREES)
    emb = ts.CachedEmbedder()
    lists = pair_lists(rows, emb.embed, cli.cap, random.Random(1))
    print(f"{len(lists)} pair lists; embeddings at {time.perf_counter() - started:.0f} s", flush=True)
    vecs = {
        k: (emb.embed([ex.query])[0], emb.embed(list(ex.chunks)), [emb.embed(_split(c)) for c in ex.chunks])
        for k, ex in enumerate(examples)
        if ex.kind in ts.REL_KINDS
    }
    folds = sorted({ex.fold for ex in examples})
    proj = Projections(lists, cli)
    if not cli.baseline:
        report_cosines(examples, vecs, folds, proj)
    if not cli.only_proj_eval:
        loso(examples, vecs, folds, proj)
    return 0


if __name__ == "__main__":
    sys.exit(main())
