"""Study: decision rules for the semantic judge's *utilized* verdicts, leave one domain out
(docs/judges-study.md, "Utilized verdicts: count rule or per-chunk threshold").

    CTXUTIL_SEMANTIC_CACHE=... python benchmarks/study_utilized_rule.py [--oof scratch.pkl]

The out-of-fold probabilities are ``train_semantic.py --loso-only``'s (the same features, folds and models);
with ``--oof`` they are kept in (or read from) that scratch file. Each candidate's parameters are chosen on
the pooled held-out predictions of the natural rows by the lowest score RMSE (the criterion
``train_semantic.py`` uses for ``round_offset``); every candidate is measured the way the judge runs it
(non-answers use no chunk). Never on the report sets.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_semantic as ts  # noqa: E402  # the trainer's own folds and figures, after sys.path

from ctxutil_otel.judges._learned_decision import decide  # noqa: E402  # after the env default
from ctxutil_otel.judges._learned_model import Decision  # noqa: E402  # after the env default

GRID = [round(0.05 * i, 2) for i in range(1, 20)]


def oof(examples: Sequence[Any]) -> tuple[list[list[float]], list[list[float]]]:
    args = argparse.Namespace(
        max_iter=150,
        learning_rate=0.08,
        max_leaf_nodes=15,
        min_samples_leaf=20,
        l2_regularization=1.0,
        seed=20261205,
        monotonic=False,
        monotonic_on="all",
    )
    rel: list[list[float]] = [[] for _ in examples]
    use: list[list[float]] = [[] for _ in examples]
    for fold in sorted({ex.fold for ex in examples}):
        r, u = ts.fit([ex for ex in examples if ex.fold != fold], args)
        for k, ex in enumerate(examples):
            if ex.fold == fold:
                rel[k] = [float(p) for p in r.predict_proba(ex.rel_rows)[:, 1]]
                use[k] = [float(p) for p in u.predict_proba(ex.use_rows)[:, 1]]
        print(f"fold {fold} done", flush=True)
    return rel, use


def rmse(examples: Sequence[Any], rel: Any, use: Any, nothing: Sequence[bool], d: Decision) -> float:
    squared = []
    for k, ex in enumerate(examples):
        if ex.kind != "natural" or ex.score is None:
            continue
        relevant, utilized, _ = decide(d, rel[k], use[k], ex.chunks)
        if nothing[k]:
            utilized = [False] * len(utilized)
        if any(relevant):
            got = sum(r and u for r, u in zip(relevant, utilized, strict=True)) / sum(relevant)
            squared.append((got - ex.score) ** 2)
    return math.sqrt(math.fsum(squared) / len(squared))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--oof", type=Path, default=None, help="scratch file for the out-of-fold probabilities")
    args = parser.parse_args()
    from ctxutil_otel.judges._non_answer import non_answer

    with open(os.environ["CTXUTIL_SEMANTIC_CACHE"], "rb") as handle:
        examples = pickle.load(handle)
    for ex in examples:
        ex.weight = 1.0
    if args.oof and args.oof.is_file():
        with open(args.oof, "rb") as handle:
            rel, use = pickle.load(handle)
    else:
        rel, use = oof(examples)
        if args.oof:
            with open(args.oof, "wb") as handle:
                pickle.dump((rel, use), handle)
    nothing = [bool(non_answer(ex.query, ex.answer)) for ex in examples]
    base = ts.choose_decision(examples, rel, use)  # relevance threshold, fallback, offset: as shipped
    print(f"trainer's decision: {base.as_dict()}")
    folds = sorted({ex.fold for ex in examples})
    mean = math.fsum(ex.score for ex in examples if ex.kind == "natural" and ex.score is not None) / sum(
        1 for ex in examples if ex.kind == "natural" and ex.score is not None
    )
    check = ts.measure(examples, rel, use, base, ["all"])["all"].line(mean)
    print(f"reproduction (trainer's figures, no non-answer rule): all {check}")

    def with_(**kw: Any) -> Decision:
        return Decision(base.relevance_threshold, base.fallback_threshold, base.round_offset, base.nothing_fallback, **kw)

    def best(candidates: list[Decision], name: str) -> Decision:
        scored = [(rmse(examples, rel, use, nothing, d), d) for d in candidates]
        for e, d in scored:
            extra = {k: v for k, v in d.as_dict().items() if k in ("round_offset", "used_threshold", "used_fallback")}
            print(f"  grid {name} {extra}: RMSE {e:.4f}")
        return min(scored, key=lambda t: t[0])[1]

    offsets = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    rules = {
        "(a) count, offset chosen": with_(),
        "(b) count, offset 0.5": Decision(base.relevance_threshold, base.fallback_threshold, 0.5, base.nothing_fallback),
        "(c) threshold t": best([with_(utilized_rule="threshold", used_threshold=t) for t in GRID], "c"),
        "(d) count + floor p_min": best(
            [
                Decision(base.relevance_threshold, base.fallback_threshold, o, base.nothing_fallback, used_threshold=p)
                for o in offsets
                for p in GRID
            ],
            "d",
        ),
    }
    t = rules["(c) threshold t"].used_threshold
    rules["(e) threshold t + fallback"] = best(
        [with_(utilized_rule="threshold", used_threshold=t, used_fallback=f) for f in GRID if f <= t],
        "e",
    )
    for name, d in rules.items():
        figures = ts.measure(examples, rel, use, d, [*folds, "all"], nothing)
        print(f"\n{name}: {d.as_dict()}")
        for key in [*folds, "all"]:
            print(f"  {key:10s} {figures[key].line(mean)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
