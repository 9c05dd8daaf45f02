"""The table of issue 26 for each offline judge: DESIGN.md's examples, a seed-style set, drift checks, cost.

    .venv/bin/python benchmarks/judge_table.py --judges learned,semantic,lexical \\
        [--seed-style src/ctxutil_otel/data/seed_style.jsonl] [--drift-file FILE.jsonl] [--limit N]

Through the real path (``ContextualUtilization`` + ``MetricRunner`` + ``agreement``, the ``bench --perturb``
functions):

* DESIGN.md's five reference examples (``ctxutil_otel/data/design_examples.jsonl``): how many get exactly
  the verdicts DESIGN.md gives, and each one's score and verdicts (``RU``: relevant and used; ``R``:
  relevant, not used; ``-``: neither);
* the seed-style set: relevance recall and F1, score RMSE against predicting the set's mean, pooled
  utilization;
* every ``--perturb`` kind on ``--drift-file`` (default: ragbench_dev.jsonl, first ``--limit`` rows):
  pooled utilization before and after, and for ``wrongsource`` the share of appended chunks called relevant;
* CPU per evaluation (``time.process_time`` over the drift file's rows, judge called directly, reasons on)
  and evaluations per CPU-second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from ctxutil_otel import ContextualUtilization, DatasetItem, MetricRunner
from ctxutil_otel._settings import Settings
from ctxutil_otel.cli._perturb import drift
from ctxutil_otel.judges._from_settings import build_judge
from ctxutil_otel.metric._agreement import LabelledRow, agreement

ROOT = Path(__file__).resolve().parents[1]
DATA = next(
    (p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
    ROOT.parent / "shared" / "data",
)
KINDS = ("refusal", "echo", "wrongsource", "swap", "truncate", "shuffle", "offtopic")


def read(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    return rows[:limit] if limit else rows


def items_of(rows: Sequence[dict[str, Any]]) -> list[DatasetItem]:
    return [
        DatasetItem(
            query=r["query"], actual_output=r["actual_output"], retrieved_content=r["retrieved_content"]
        )
        for r in rows
    ]


def _f(value: float | None, places: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{places}f}"


def verdict_code(relevant: bool, utilized: bool) -> str:
    return "RU" if relevant and utilized else "R" if relevant else "-"


def design(judge: Any) -> str:
    text = resources.files("ctxutil_otel.data").joinpath("design_examples.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    exact = 0
    cells = []
    for r in rows:
        got = judge.judge_sync(r["query"], r["actual_output"], r["retrieved_content"], reasons=False)
        codes = [verdict_code(v.is_relevant, v.is_utilized) for v in sorted(got, key=lambda v: v.index)]
        want = [verdict_code(lab["relevant"], lab["utilized"]) for lab in r["chunk_labels"]]
        exact += codes == want
        n_rel = sum(v.is_relevant for v in got)
        score = sum(v.is_relevant and v.is_utilized for v in got) / n_rel if n_rel else None
        cells.append(f"{r['id'].removeprefix('design-')} {_f(score, 2)} ({' '.join(codes)})")
    return f"{exact} of {len(rows)} exact: " + "; ".join(cells)


def seed_style(runner: MetricRunner, path: Path) -> str:
    rows = read(path)
    results = asyncio.run(runner.run(items_of(rows)))
    labels = [LabelledRow.from_record(r) for r in rows]
    fig = agreement(labels, results)
    scored = [lab.expected_score for lab in labels if lab.expected_score is not None]
    mean = sum(scored) / len(scored)
    base = math.sqrt(sum((s - mean) ** 2 for s in scored) / len(scored))
    return (
        f"{path.name} ({len(rows)} rows): relevance recall {_f(fig.relevance_recall)} "
        f"F1 {_f(fig.relevance_f1)}; "
        f"score RMSE {fig.rmse:.3f} vs predicting the mean {base:.3f} (ratio {fig.rmse / base:.2f}); "
        f"low-score AUROC {fig.low_auroc if fig.low_auroc is None else round(fig.low_auroc, 3)}; pooled "
        f"{fig.pooled_predicted:.3f} (labelled {fig.pooled_expected:.3f})"
    )


def cost(judge: Any, rows: Sequence[dict[str, Any]]) -> str:
    judge.judge_sync(rows[0]["query"], rows[0]["actual_output"], rows[0]["retrieved_content"])  # warm
    started = time.process_time()
    for r in rows:
        judge.judge_sync(r["query"], r["actual_output"], r["retrieved_content"])
    per = (time.process_time() - started) / len(rows)
    return f"CPU per evaluation {per * 1000:.2f} ms ({1 / per:.0f} evaluations per CPU-second)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--judges", default="learned,semantic,lexical")
    parser.add_argument("--seed-style", type=Path, nargs="*", default=[])
    parser.add_argument("--drift-file", type=Path, default=DATA / "ragbench_dev.jsonl")
    parser.add_argument("--limit", type=int, default=None, help="first N rows of --drift-file")
    parser.add_argument("--no-drift", action="store_true")
    args = parser.parse_args(argv)
    drift_rows = read(args.drift_file, args.limit)
    for name in args.judges.split(","):
        judge = build_judge(Settings(judge=name))
        runner = MetricRunner([ContextualUtilization(judge=judge)])
        print(f"## {name} ({getattr(judge, 'model', None) or 'no model'})")
        print(f"DESIGN.md examples: {design(judge)}")
        for path in args.seed_style:
            print(seed_style(runner, path))
        if not args.no_drift:
            items = items_of(drift_rows)
            results = asyncio.run(runner.run(items))
            for d in drift(runner, items, results, KINDS, seed=0):
                assert d.pooled_original is not None
                extra = (
                    f", appended chunk relevant {d.appended_relevant:.3f}"
                    if d.appended_relevant is not None
                    else ""
                )
                moved = (d.pooled_perturbed or 0.0) - d.pooled_original
                print(
                    f"  --perturb {d.perturbation} on {args.drift_file.name} ({d.rows} rows): pooled "
                    f"{d.pooled_original:.3f} -> {_f(d.pooled_perturbed)} "
                    f"({moved:+.3f}){extra}"
                )
        print(cost(judge, drift_rows[:200]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
