"""Tune the LexicalJudge thresholds on the train file; print train and dev figures for the choice.

    .venv/bin/python benchmarks/tune_lexical.py [--train ../shared/data/ragbench_train.jsonl]
                                                [--dev ../shared/data/ragbench_dev.jsonl] [--no-dev]

1. Computes every chunk's :class:`ChunkSignals` on the train rows once (the signals do not depend
   on the thresholds), the way the metric calls the judge: identical chunks judged once.
2. Grid-searches the thresholds on train only. Choice rule: among the points whose train figures
   clear the issue-2 floors with a margin (utilization F1 >= 0.885, pooled utilization within 0.04
   of the labelled pooled value, score RMSE below always answering 1.0), the lowest score RMSE;
   ties broken by the higher low-utilization AUROC.
3. Prints the chosen parameters and the defaults in ``LexicalJudge``, then the train figures and
   (once) the dev figures of the chosen point, both through the real path: ContextualUtilization
   with MetricRunner, compared by ``ctxutil_otel.metric._agreement.agreement``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxutil_otel import ContextualUtilization, DatasetItem, MetricRunner
from ctxutil_otel.judges._lexical import ChunkSignals, LexicalJudge
from ctxutil_otel.metric._agreement import (
    AgreementFigures,
    LabelledRow,
    RowPrediction,
    agreement,
    agreement_from_predictions,
)
from ctxutil_otel.metric._contextual_utilization import normalise_chunk

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

GRID: dict[str, Sequence[Any]] = {
    "utilization_threshold": [0.25, 0.3, 0.35, 0.4, 0.45, 0.5],
    "min_support": [0.0, 0.05, 0.1, 0.15],
    "relevance_threshold": [0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4],
    "term_weight": [0.0, 0.1, 0.2, 0.3],
}


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def unique_chunks(chunks: Sequence[str]) -> tuple[list[int], list[int]]:
    """Mirror of the metric's de-duplication: (indices judged, index of the original per chunk)."""
    first: dict[str, int] = {}
    unique: list[int] = []
    original: list[int] = []
    for i, text in enumerate(chunks):
        key = normalise_chunk(text)
        if key not in first:
            first[key] = i
            unique.append(i)
        original.append(first[key])
    return unique, original


def fast_predictions(
    judge: LexicalJudge, cached: list[tuple[list[ChunkSignals], list[int], list[int]]]
) -> list[RowPrediction]:
    """What the metric would report for each row, without building result objects."""
    out = []
    for signals, unique, original in cached:
        relevant, utilized, _ = judge.flags(signals)
        rel_by = {c: relevant[p] for p, c in enumerate(unique)}
        use_by = {c: relevant[p] and utilized[p] for p, c in enumerate(unique)}
        n_rel = sum(relevant)
        score = sum(use_by.values()) / n_rel if n_rel else None
        out.append(
            RowPrediction(
                relevant=[rel_by[original[i]] for i in range(len(original))],
                utilized=[use_by[original[i]] for i in range(len(original))],
                score=score,
            )
        )
    return out


def always_one_rmse(rows: Sequence[LabelledRow]) -> float:
    scores = [r.expected_score for r in rows if r.expected_score is not None]
    return math.sqrt(sum((1.0 - s) ** 2 for s in scores) / len(scores))


def acceptable(fig: AgreementFigures, baseline_rmse: float) -> bool:
    if fig.utilization_f1 is None or fig.rmse is None or fig.pooled_predicted is None:
        return False
    assert fig.pooled_expected is not None
    return (
        fig.utilization_f1 >= 0.885
        and abs(fig.pooled_predicted - fig.pooled_expected) <= 0.04
        and fig.rmse < baseline_rmse
    )


def line(name: str, fig: AgreementFigures) -> str:
    def f(value: float | None) -> str:
        return "  n/a" if value is None else f"{value:.3f}"

    return (
        f"{name:<9} n={fig.n:<5} scored={fig.scored:<5} rmse={f(fig.rmse)} mae={f(fig.mae)} "
        f"rel P/R/F1={f(fig.relevance_precision)}/{f(fig.relevance_recall)}/{f(fig.relevance_f1)} "
        f"use P/R/F1={f(fig.utilization_precision)}/{f(fig.utilization_recall)}/{f(fig.utilization_f1)} "
        f"pooled={f(fig.pooled_predicted)} vs {f(fig.pooled_expected)} low_auroc={f(fig.low_auroc)}"
    )


def real_figures(judge: LexicalJudge, records: list[dict[str, Any]]) -> None:
    items = [
        DatasetItem(
            query=r["query"], actual_output=r["actual_output"], retrieved_content=r["retrieved_content"]
        )
        for r in records
    ]
    results = asyncio.run(MetricRunner([ContextualUtilization(judge=judge)]).run(items))
    labels = [LabelledRow.from_record(r) for r in records]
    report = agreement(labels, results)
    print(f"{line('overall', report)} (always-1.0 RMSE {always_one_rmse(labels):.3f})")
    for name, fig in report.per_subset.items():
        group = [row for row in labels if row.subset == name]
        print(f"{line(name, fig)} (always-1.0 RMSE {always_one_rmse(group):.3f})")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--train", type=Path, default=DATA / "ragbench_train.jsonl")
    parser.add_argument("--dev", type=Path, default=DATA / "ragbench_dev.jsonl")
    parser.add_argument("--no-dev", action="store_true", help="do not look at the dev file")
    parser.add_argument("--top", type=int, default=8, help="grid points to list")
    args = parser.parse_args(argv)

    for name, path in (("--train", args.train), ("--dev", None if args.no_dev else args.dev)):
        if path is not None and not path.is_file():
            parser.error(f"{name}: no file at {path} (the RAGBench labelled files live in ../shared/data/)")
    train = load(args.train)
    labels = [LabelledRow.from_record(r) for r in train]
    probe = LexicalJudge()
    cached = []
    for r in train:
        unique, original = unique_chunks(r["retrieved_content"])
        signals = probe.signals(
            r["query"], r["actual_output"], [r["retrieved_content"][i] for i in unique], reasons=False
        )
        cached.append((signals, unique, original))
    baseline = always_one_rmse(labels)
    print(f"train: {len(train)} rows; always-1.0 RMSE {baseline:.3f}; grid of", end=" ")
    points = [dict(zip(GRID, values, strict=True)) for values in itertools.product(*GRID.values())]
    print(f"{len(points)} points")

    scored = []
    for params in points:
        report = agreement_from_predictions(labels, fast_predictions(LexicalJudge(**params), cached))
        scored.append((params, report))
    ok = [(p, r) for p, r in scored if acceptable(r, baseline)]
    print(f"{len(ok)} points clear the floors on train with margin")
    ok.sort(key=lambda pr: (pr[1].rmse or 1.0, -(pr[1].low_auroc or 0.0)))
    for params, report in ok[: args.top]:
        print(f"  {params}\n    {line('train', report)}")
    if not ok:
        return 1
    chosen = ok[0][0]
    defaults = LexicalJudge()
    current = {k: getattr(defaults, k) for k in GRID}
    print(f"\nchosen on train: {chosen}")
    print(
        f"LexicalJudge defaults: {current}{'' if current == chosen else '  (DIFFERENT: update the defaults)'}"
    )

    judge = LexicalJudge(**chosen)
    print("\ntrain figures (ContextualUtilization + MetricRunner + agreement):")
    real_figures(judge, train)
    if not args.no_dev:
        print("\ndev figures, chosen point only:")
        real_figures(judge, load(args.dev))
    return 0


if __name__ == "__main__":
    sys.exit(main())
