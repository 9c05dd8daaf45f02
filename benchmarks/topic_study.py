"""A tried variant of the semantic judge (docs/judges-study.md): topic-removed query similarity as extra
relevance features, measured leave one domain out.

    .venv/bin/pip install -e '.[train,semantic]'
    .venv/bin/python benchmarks/topic_study.py --mode mean       # the chunks' mean subtracted
    .venv/bin/python benchmarks/topic_study.py --mode project    # the chunks' mean direction projected out
    .venv/bin/python benchmarks/topic_study.py --mode both       # mean and project together (16 values)
    .venv/bin/python benchmarks/topic_study.py --mode query      # m's direction removed from the query only
    .venv/bin/python benchmarks/topic_study.py --baseline        # the same pipeline, no added features

(``CTXUTIL_SEMANTIC_CACHE=.cache/examples.pkl`` reuses train_semantic.py's cached feature rows.)

Every chunk of an interaction shares the query's topic; what tells the relevant ones is the query's aspect.
Within each interaction, m is the mean of the chunks' unit vectors. ``mean``: m is subtracted from the
query's, the chunks' and their sentences' vectors; ``project``: the component along m/|m| is removed from
each; ``query``: from the query's vector only. The cosine of the query's residual with the chunk's and the
best one over the chunk's sentences, each with rank, gap and z-score within the interaction (8 values per
mode), are appended to the relevance rows (query and chunks only, never the answer). The lexical analogue
(coverage of the query words rare among the interaction's chunks) is already a feature: ``q_cover_local``
(in-interaction IDF), with its rank and gap, so it is not added.
The utilization model and the decision rules are train_semantic.py's own.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import projection_study as ps  # noqa: E402
import train_semantic as ts  # noqa: E402


def _residual(x: Any, m: Any, mode: str) -> Any:
    import numpy as np

    if mode == "mean":
        r = x - m
    else:
        u = m / max(float(np.linalg.norm(m)), 1e-9)
        r = x - (x @ u)[..., None] * u if x.ndim > 1 else x - float(x @ u) * u
    return ps._unit(r)


def topic_rows(vecs: tuple, modes: list[str]) -> list[list[float]]:
    """The topic-removed features of one example's chunks (8 per mode, per chunk)."""
    q, chunks, sents = vecs
    out: list[list[float]] = [[] for _ in range(len(chunks))]
    m = chunks.mean(axis=0)
    for mode in modes:
        if mode == "query":  # the topic direction removed from the query only
            qr = _residual(q, m, "project")
            pc = [float(x) for x in chunks @ qr]
            pq = [float((s @ qr).max()) for s in sents]
        else:
            qr = _residual(q, m, mode)
            pc = [float(x) for x in _residual(chunks, m, mode) @ qr]
            pq = [float((_residual(s, m, mode) @ qr).max()) for s in sents]
        (rc, gc, zc), (rs, gs, zs) = ps._ranked(pc), ps._ranked(pq)
        for i, t in enumerate(zip(pc, pq, rc, rs, gc, gs, zc, zs, strict=True)):
            out[i] += list(t)
    return out


def _area(xs: list[float], ys: list[bool]) -> float:
    return ps._area(xs, ys)


def report_cosines(examples: list[Any], vecs: dict[int, tuple], folds: list[str], modes: list[str]) -> None:
    """Zero-shot relevance AUROC per fold (natural rows' chunks): plain vs topic-removed cosines."""
    for fold in folds:
        plain: list[list[float]] = []
        new: list[list[float]] = []
        ys: list[bool] = []
        for k, v in vecs.items():
            ex = examples[k]
            if ex.fold != fold or ex.kind != "natural":
                continue
            plain += ps.proj_rows(v, _eye())
            new += topic_rows(v, modes)
            ys += ex.relevant
        parts = [
            f"{mode} q-chunk {_area([r[8 * j] for r in new], ys):.3f} "
            f"q-sent {_area([r[8 * j + 1] for r in new], ys):.3f}"
            for j, mode in enumerate(modes)
        ]
        print(
            f"{fold}: relevance AUROC plain q-chunk {_area([r[0] for r in plain], ys):.3f} q-sent "
            f"{_area([r[1] for r in plain], ys):.3f}; topic-removed {'; '.join(parts)}",
            flush=True,
        )


def _eye() -> Any:
    import numpy as np

    return np.eye(256, dtype=np.float32)


def loso(examples: list[Any], vecs: dict[int, tuple], folds: list[str], modes: list[str]) -> None:
    started = time.perf_counter()
    for k, v in vecs.items():
        ex = examples[k]
        extra = topic_rows(v, modes) if modes else [[] for _ in ex.chunks]
        ex.rel_rows = [list(a) + b for a, b in zip(ex.rel_rows, extra, strict=True)]
    oof_rel: list[list[float]] = [[] for _ in examples]
    oof_use: list[list[float]] = [[] for _ in examples]
    for fold in folds:
        rel, use = ts.fit([ex for ex in examples if ex.fold != fold], ps.TREES)
        for k, ex in enumerate(examples):
            if ex.fold == fold:
                oof_use[k] = [float(p) for p in use.predict_proba(ex.use_rows)[:, 1]]
                if k in vecs:
                    oof_rel[k] = [float(p) for p in rel.predict_proba(ex.rel_rows)[:, 1]]
        print(f"fold {fold} done at {time.perf_counter() - started:.0f} s", flush=True)
    ps.report_loso(
        examples, vecs, oof_rel, oof_use, folds, f"topic-removed features {modes or 'none (baseline)'}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mode", choices=("mean", "project", "both", "query"), default="mean")
    parser.add_argument("--baseline", action="store_true", help="no added features (the shipped model)")
    parser.add_argument("--only-cosines", action="store_true", help="print the zero-shot AUROCs only")
    cli = parser.parse_args()
    from ctxutil_otel.judges._semantic_features import _split

    started = time.perf_counter()
    rows = ts.load_rows(
        [ts.DATA / "ragbench_train.jsonl", ts.DATA / "ragbench_dev.jsonl", ts.SEED_STYLE_TRAIN]
    )
    ts.relabel_non_answers(rows)
    examples = ps.load_examples(rows, ps.TREES)
    emb = ts.CachedEmbedder()
    vecs = {
        k: (emb.embed([ex.query])[0], emb.embed(list(ex.chunks)), [emb.embed(_split(c)) for c in ex.chunks])
        for k, ex in enumerate(examples)
        if ex.kind in ts.REL_KINDS
    }
    print(f"{len(examples)} examples; vectors at {time.perf_counter() - started:.0f} s", flush=True)
    folds = sorted({ex.fold for ex in examples})
    modes = [] if cli.baseline else (["mean", "project"] if cli.mode == "both" else [cli.mode])
    if modes:
        report_cosines(examples, vecs, folds, modes)
    if not cli.only_cosines:
        loso(examples, vecs, folds, modes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
