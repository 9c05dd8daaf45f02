"""Study: decision rules for the semantic judge's *utilized* verdicts, leave one domain out
(docs/judges-study.md, "Utilized verdicts: the count rule against per-chunk thresholds").

    CTXUTIL_SEMANTIC_CACHE=... python benchmarks/study_utilized_rule.py [--oof scratch.pkl]

The out-of-fold probabilities are ``train_semantic.py --loso-only``'s (the same features, folds, models and
relevance decision); with ``--oof`` they are kept in (or read from) that scratch file. Candidates: (a) the
judge's count rule with the trainer's offset; (b) the count rule, offset 0.5; (c) per chunk, used iff
P(utilized | relevant) >= t; (d) the count rule, a chunk counted in only if its P >= p_min; (e) (c), and
when no relevant chunk reaches t, the most likely one used if its P >= a fallback. Parameters chosen on the
pooled held-out natural rows by the lowest score RMSE (the criterion that chose the offset); each candidate
measured as the judge runs it (non-answers use no chunk). Then a pooled grid of every candidate's
parameters, to show whether any setting meets the rule for shipping. Never on the report sets.
"""

from __future__ import annotations

import argparse
import math
import os
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_semantic as ts  # noqa: E402  # the trainer's own folds and figures, after sys.path

from ctxutil_otel.judges._learned_decision import Verdicts, decide  # noqa: E402  # after the env default
from ctxutil_otel.judges._learned_model import Decision  # noqa: E402  # after the env default

GRID = [round(0.05 * i, 2) for i in range(1, 20)]
SHIPPED_SHARE_CUT = 2 / 3  # the rule for shipping: the ignored-marked-used share down by a third or more
RMSE_SLACK = 0.005


@dataclass(frozen=True)
class Candidate:
    """A utilized rule over the judge's relevance decision: ``count`` (the judge's, with ``floor``: the
    least P(utilized) counted in) or ``threshold`` (each chunk by its own P, with ``fallback``)."""

    decision: Decision
    rule: str = "count"
    threshold: float = 0.0
    fallback: float = 1.01  # above any probability: no fallback
    floor: float = 0.0

    def params(self) -> str:
        if self.rule == "count":
            return f"count, offset {self.decision.round_offset}" + (
                f", p_min {self.floor}" if self.floor else ""
            )
        return f"threshold {self.threshold}" + (f", fallback {self.fallback}" if self.fallback <= 1 else "")


def verdicts(c: Candidate, p_rel: Sequence[float], p_use: Sequence[float], ties: Sequence[str]) -> Verdicts:
    """The candidate's verdicts (the relevance verdicts and ``expected`` always the judge's)."""
    v = decide(c.decision, p_rel, p_use, ties)
    if c.rule == "count":
        return Verdicts(
            v.relevant, [u and p >= c.floor for u, p in zip(v.utilized, p_use, strict=True)], v.expected
        )
    used = [r and p >= c.threshold for r, p in zip(v.relevant, p_use, strict=True)]
    candidates = [i for i, r in enumerate(v.relevant) if r]
    if candidates and not any(used):
        best = min(candidates, key=lambda i: (-p_use[i], ties[i], i))
        used[best] = p_use[best] >= c.fallback
    return Verdicts(v.relevant, used, v.expected)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--oof", type=Path, default=None, help="scratch file for the out-of-fold probabilities"
    )
    parser.add_argument(
        "--also-threshold",
        type=float,
        action="append",
        default=[],
        help="also print the per-fold figures of the threshold rule at this t (for reference: not chosen)",
    )
    args = parser.parse_args()
    from ctxutil_otel.judges._non_answer import non_answer
    from ctxutil_otel.metric._agreement import auroc

    # The cache was written by train_semantic.py run as a script: its rows are ``__main__.Variant``.
    setattr(sys.modules["__main__"], "Variant", ts.Variant)  # noqa: B010  # the pickle's lookup name
    with open(os.environ["CTXUTIL_SEMANTIC_CACHE"], "rb") as handle:
        examples = pickle.load(handle)
    for ex in examples:
        ex.weight = 1.0
    if args.oof and args.oof.is_file():
        with open(args.oof, "rb") as handle:
            rel, use = pickle.load(handle)
    else:
        rel, use = ts.out_of_fold(examples, ts.default_args())
        if args.oof:
            with open(args.oof, "wb") as handle:
                pickle.dump((rel, use), handle)
    nothing = [bool(non_answer(ex.query, ex.answer)) for ex in examples]
    base = ts.choose_decision(examples, rel, use)  # relevance threshold, fallback, offset: as the trainer
    folds = sorted({ex.fold for ex in examples})
    scored = [ex.score for ex in examples if ex.kind == "natural" and ex.score is not None]
    mean = math.fsum(scored) / len(scored)
    print(f"trainer's decision: {base.as_dict()}")
    check = ts.measure(examples, rel, use, base, ["all"])["all"].line(mean)
    print(f"reproduction (trainer's figures, no non-answer rule): all {check}")

    def figures(c: Candidate, keys: Sequence[str]) -> dict[str, ts.Figures]:
        return ts.measure(examples, rel, use, c, keys, nothing, verdicts)

    def pooled(c: Candidate) -> tuple[float, float, float]:
        f = figures(c, ["all"])["all"]
        area = auroc(f.low, f.other)
        return (
            f.per_chunk()[2],
            area if area is not None else float("nan"),
            math.sqrt(math.fsum(f.squared) / len(f.squared)),
        )

    def best(cands: list[Candidate]) -> Candidate:
        return min(cands, key=lambda c: pooled(c)[2])

    def with_offset(o: float) -> Decision:
        return Decision(base.relevance_threshold, base.fallback_threshold, o, base.nothing_fallback)

    offsets = [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    chosen = {
        "(a) count, offset chosen": Candidate(base),
        "(b) count, offset 0.5": Candidate(with_offset(0.5)),
        "(c) threshold t": best([Candidate(base, "threshold", t) for t in GRID]),
        "(d) count + floor p_min": best([Candidate(with_offset(o), floor=p) for o in offsets for p in GRID]),
    }
    t = chosen["(c) threshold t"].threshold
    chosen["(e) threshold t + fallback"] = best(
        [Candidate(base, "threshold", t, f) for f in GRID if f <= t] + [chosen["(c) threshold t"]]
    )
    for t in args.also_threshold:
        chosen[f"(reference, not chosen) threshold {t}"] = Candidate(base, "threshold", t)
    for name, c in chosen.items():
        f = figures(c, [*folds, "all"])
        print(f"\n{name}: {c.params()}")
        for key in [*folds, "all"]:
            print(f"  {key:12s} {f[key].line(mean)}")
    share0, area0, rmse0 = pooled(chosen["(a) count, offset chosen"])
    print(
        "\npooled grid (ignored marked used, low-util AUROC, RMSE; PASS: share <= "
        f"{share0 * SHIPPED_SHARE_CUT:.3f}, AUROC >= {area0:.3f}, RMSE <= {rmse0 + RMSE_SLACK:.3f}):"
    )
    grid = [
        Candidate(with_offset(o), floor=p)
        for o in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
        for p in (0.0, 0.2, 0.3, 0.4, 0.5)
    ]
    grid += [Candidate(base, "threshold", t, f) for t in (0.2, 0.3, 0.4, 0.5, 0.6, 0.7) for f in (1.01, 0.05)]
    for c in grid:
        share, area, rmse = pooled(c)
        ok = (
            share <= share0 * SHIPPED_SHARE_CUT
            and round(area, 3) >= round(area0, 3)
            and rmse <= rmse0 + RMSE_SLACK
        )
        print(f"  {c.params():32s} {share:.3f} {area:.3f} {rmse:.3f}{'  PASS' if ok else ''}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
