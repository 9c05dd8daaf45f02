"""Report the offline judges on a labelled file: the issue-11 figures with bootstrap intervals, drift checks.

    .venv/bin/python benchmarks/eval_judges.py [FILE.jsonl] [--judges learned,lexical] [--resamples 1000]
        [--model MODEL.json]

For each judge, through the real path (``ContextualUtilization`` + ``MetricRunner`` + ``agreement``):
score RMSE, low-score AUROC, relevance / utilization F1 and pooled utilization, overall and per subset,
with 95% percentile bootstrap intervals (rows resampled with replacement, seed 0) for RMSE and AUROC;
then every perturbation of ``ctxutil-otel bench --perturb`` (pooled utilization and mean score,
original vs perturbed); then the ``added_offtopic`` contract check (DESIGN.md: irrelevant chunks neither
lower nor raise the score): 1 and 3 chunks of other rows appended to every row, the share of scored rows
whose score changes and the mean change, and the share of rows with no labelled-relevant chunk the judge
calls not applicable. Prints Markdown tables (the ones in docs/judges.md). Defaults to
``../shared/data/ragbench_dev.jsonl``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from ctxutil_otel import ContextualUtilization, DatasetItem, MetricEvaluationResult, MetricRunner
from ctxutil_otel._settings import Settings
from ctxutil_otel.cli._perturb import PERTURBATIONS, add_offtopic, drift
from ctxutil_otel.judges import LearnedJudge
from ctxutil_otel.judges._from_settings import build_judge
from ctxutil_otel.judges._learned_model import load_model
from ctxutil_otel.metric._agreement import LOW_SCORE, AgreementFigures, LabelledRow, agreement, auroc

ROOT = Path(__file__).resolve().parents[1]
DATA = next(
    (p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
    ROOT.parent / "shared" / "data",
)


def interval(values: Sequence[float]) -> str:
    ordered = sorted(values)
    lo = ordered[int(0.025 * (len(ordered) - 1))]
    hi = ordered[math.ceil(0.975 * (len(ordered) - 1))]
    return f"[{lo:.3f}, {hi:.3f}]"


def bootstrap(pairs: list[tuple[float, float]], resamples: int, seed: int) -> tuple[str, str]:
    """95% intervals of (RMSE, low-score AUROC) over (expected, predicted) pairs."""
    rng = random.Random(seed)
    rmses: list[float] = []
    aurocs: list[float] = []
    for _ in range(resamples):
        sample = [pairs[rng.randrange(len(pairs))] for _ in pairs]
        rmses.append(math.sqrt(sum((p - e) ** 2 for e, p in sample) / len(sample)))
        area = auroc([-p for e, p in sample if e < LOW_SCORE], [-p for e, p in sample if e >= LOW_SCORE])
        if area is not None:
            aurocs.append(area)
    return interval(rmses), interval(aurocs) if aurocs else "n/a"


def offtopic_line(
    name: str,
    runner: MetricRunner,
    items: Sequence[DatasetItem],
    results: Sequence[MetricEvaluationResult],
    labels: Sequence[LabelledRow],
) -> str:
    """One Markdown row: not-applicable recall, then for +1 and +3 off-topic chunks the share of scored
    rows whose score changed and the mean change (a row that becomes not applicable counts as 0)."""
    nothing = [i for i, lab in enumerate(labels) if lab.expected_score is None]
    recall = sum(1 for i in nothing if results[i].score is None) / len(nothing) if nothing else float("nan")
    cells = [f"{recall:.3f} ({len(nothing)} rows)"]
    for k in (1, 3):
        after = asyncio.run(runner.run(add_offtopic(items, k, seed=k)))
        pairs = [(a.score, b.score) for a, b in zip(results, after, strict=True) if a.score is not None]
        changed = sum(1 for a, b in pairs if a != b)
        mean = math.fsum((b if b is not None else 0.0) - a for a, b in pairs) / len(pairs)
        cells.append(f"{changed / len(pairs):.3f} ({mean:+.3f})")
    return f"| {name} | " + " | ".join(cells) + " |"


def f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", type=Path, nargs="?", default=DATA / "ragbench_dev.jsonl")
    parser.add_argument("--judges", default="learned,lexical")
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--no-drift", action="store_true")
    parser.add_argument(
        "--model", type=Path, default=None, help="a learned-judge model file instead of the shipped one"
    )
    args = parser.parse_args(argv)
    if not args.file.is_file():
        parser.error(f"no file at {args.file} (the RAGBench labelled files live in ../shared/data/)")
    records = [json.loads(line) for line in args.file.open(encoding="utf-8") if line.strip()]
    items = [
        DatasetItem(
            query=r["query"], actual_output=r["actual_output"], retrieved_content=r["retrieved_content"]
        )
        for r in records
    ]
    labels = [LabelledRow.from_record(r) for r in records]
    scored = [r.expected_score for r in labels if r.expected_score is not None]
    mean = sum(scored) / len(scored)
    print(
        f"{args.file.name}: {len(records)} rows; predicting the mean ({mean:.3f}) gives RMSE "
        f"{math.sqrt(sum((s - mean) ** 2 for s in scored) / len(scored)):.3f}\n"
    )
    drift_rows: list[str] = []
    offtopic_rows: list[str] = []
    for name in args.judges.split(","):
        judge = (
            LearnedJudge(learned_model=load_model(json.loads(args.model.read_text(encoding="utf-8"))))
            if name == "learned" and args.model is not None
            else build_judge(Settings(judge=name))
        )
        runner = MetricRunner([ContextualUtilization(judge=judge)])
        results = asyncio.run(runner.run(items))
        report = agreement(labels, results)
        print(f"### judge `{name}` ({getattr(judge, 'model', None) or 'no model'})\n")
        print(
            "| subset | rows | score RMSE [95% CI] | low rows | low-score AUROC [95% CI] | relevance F1 | "
            "utilization F1 | pooled (labelled) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        groups: list[tuple[str, AgreementFigures, list[tuple[float, float]]]] = []
        for subset, figures in report.per_subset.items():
            pairs = [
                (lab.expected_score, res.score)
                for lab, res in zip(labels, results, strict=True)
                if lab.subset == subset and lab.expected_score is not None and res.score is not None
            ]
            groups.append((subset, figures, pairs))
        all_pairs = [
            (lab.expected_score, res.score)
            for lab, res in zip(labels, results, strict=True)
            if lab.expected_score is not None and res.score is not None
        ]
        groups.append(("**overall**", report, all_pairs))
        for subset, figures, pairs in groups:
            rmse_ci, auroc_ci = bootstrap(pairs, args.resamples, 0)
            print(
                f"| {subset} | {figures.n} | {f(figures.rmse)} {rmse_ci} | {figures.low_rows} | "
                f"{f(figures.low_auroc)} {auroc_ci} | {f(figures.relevance_f1)} | "
                f"{f(figures.utilization_f1)} | {f(figures.pooled_predicted)} "
                f"({f(figures.pooled_expected)}) |"
            )
        print()
        if not args.no_drift:
            for d in drift(runner, items, results, PERTURBATIONS, seed=0):
                assert d.pooled_original is not None and d.pooled_perturbed is not None
                drift_rows.append(
                    f"| {name} | {d.perturbation} | {f(d.pooled_original)} → {f(d.pooled_perturbed)} "
                    f"({d.pooled_perturbed - d.pooled_original:+.3f}) | {f(d.mean_score_original)} → "
                    f"{f(d.mean_score_perturbed)} |"
                )
        if not args.no_drift:
            offtopic_rows.append(offtopic_line(name, runner, items, results, labels))
    if drift_rows:
        print("| judge | perturbation | pooled utilization | mean score |\n|---|---|---|---|")
        print("\n".join(drift_rows))
    if offtopic_rows:
        print(
            "\n| judge | not applicable on rows with no labelled-relevant chunk | added_offtopic +1: rows "
            "whose score changed (mean change) | +3 |\n|---|---|---|---|"
        )
        print("\n".join(offtopic_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
