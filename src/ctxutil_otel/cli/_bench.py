"""``ctxutil-otel bench FILE.jsonl`` (or ``--data NAME``, a bundled set): measure a judge against labels
(quality and speed).

Each line needs the ``evaluate`` fields (``query``, ``retrieved_content``, ``actual_output``) plus the
labels ``chunk_labels`` (one ``{"relevant": bool, "utilized": bool}`` per chunk) and
``expected_score`` (number in [0, 1] or ``null``); ``subset`` groups the per-subset figures. The
figures and their definitions are those of :mod:`ctxutil_otel.metric._agreement`.

Speed (``evals_per_second``) is measured around the evaluation only (``MetricRunner.run`` over the
readable rows, in this one process), not around reading the file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..data import DATASETS, dataset_path
from ..judges import TokenUsage
from ..metric import ContextualUtilization, MetricEvaluationResult, MetricRunner
from ..metric._agreement import AgreementFigures, AgreementReport, LabelledRow, agreement
from ._io import (
    BadLine,
    Line,
    add_judge_options,
    batch_judge,
    enumerated,
    read_items,
    report_bad_line,
    settings_from_args,
)
from ._perturb import add_arguments as add_perturb_arguments
from ._perturb import check_extras, extras

__all__ = ["register", "render_table", "rmse_predicting_mean"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="compare a judge with labelled data (chunk_labels, expected_score): quality and speed",
        description="Run the Contextual Utilization metric over FILE.jsonl and compare it with the "
        "labels: score RMSE/MAE, relevance and utilization precision/recall/F1, pooled utilization, "
        "low-utilization AUROC, per subset, and evaluations per second. A bad line is reported on "
        "stderr with its number and the rest continue; exit status 1 if any line was bad or any "
        "evaluation failed; 2 when no line has labels. Options left unset take their CTXUTIL_* variable, "
        "else the default (docs/settings.md).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("file", type=Path, metavar="FILE.jsonl", nargs="?")
    source.add_argument(
        "--data",
        type=enumerated,
        choices=sorted(DATASETS),
        default=None,
        help="a bundled labelled set instead of FILE.jsonl: sample (250 RAGBench rows), seed (80 short "
        "seed-style interactions in 10 domains), design (DESIGN.md's five reference examples)",
    )
    add_judge_options(parser)
    parser.add_argument("--limit", type=int, default=None, help="only the first N non-blank lines")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    add_perturb_arguments(parser)
    parser.set_defaults(func=run)


_NO_LABELS = "chunk_labels: missing (bench compares the judge with labels)"


def _labelled(
    parsed: Iterator[Line | BadLine], limit: int | None
) -> Iterator[tuple[Line, LabelledRow] | BadLine]:
    for count, entry in enumerate(parsed):
        if limit is not None and count >= limit:
            return
        if isinstance(entry, BadLine):
            yield entry
            continue
        if "chunk_labels" not in entry.row:
            yield BadLine(entry.number, _NO_LABELS)
            continue
        try:
            yield entry, LabelledRow.from_record(entry.row)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "labels"
            yield BadLine(entry.number, f"{where}: {first['msg']}")
        except ValueError as exc:
            yield BadLine(entry.number, str(exc))


def _fmt(value: float | None, width: int = 6) -> str:
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.3f}"


def _header(width: int) -> str:
    return (
        f"{'subset':<{width}} {'n':>5} {'scored':>6} {'errors':>6} {'rmse':>6} {'mae':>6} "
        f"{'rel_P':>6} {'rel_R':>6} {'rel_F1':>6} {'use_P':>6} {'use_R':>6} {'use_F1':>6} "
        f"{'pooled':>6} {'expect':>6} {'low':>4} {'AUROC':>6}"
    )


def _row(name: str, f: AgreementFigures, width: int) -> str:
    return (
        f"{name:<{width}} {f.n:>5} {f.scored:>6} {f.errors:>6} {_fmt(f.rmse)} {_fmt(f.mae)} "
        f"{_fmt(f.relevance_precision)} {_fmt(f.relevance_recall)} {_fmt(f.relevance_f1)} "
        f"{_fmt(f.utilization_precision)} {_fmt(f.utilization_recall)} {_fmt(f.utilization_f1)} "
        f"{_fmt(f.pooled_predicted)} {_fmt(f.pooled_expected)} {f.low_rows:>4} {_fmt(f.low_auroc)}"
    )


def render_table(report: AgreementReport) -> str:
    """The figures as a fixed-width text table: one line per subset, then ``overall``."""
    width = max([10, *(len(name) for name in report.per_subset)])
    lines = [_header(width)]
    lines.extend(_row(name, figures, width) for name, figures in report.per_subset.items())
    lines.append(_row("overall", report, width))
    lines.append(
        "rmse/mae over scored rows; rel_* over all chunks; use_* over chunks labelled relevant; "
        "pooled = utilized/relevant chunks (predicted vs expected); low = rows with expected < 0.5, "
        "AUROC = how well a lower score flags them"
    )
    return "\n".join(lines)


def rmse_predicting_mean(labels: list[LabelledRow]) -> float | None:
    """Score RMSE of answering the mean ``expected_score`` for every row with one (the baseline a judge's
    ``rmse`` must beat to carry information); ``None`` when no row has an expected score."""
    expected = [lab.expected_score for lab in labels if lab.expected_score is not None]
    if not expected:
        return None
    mean = sum(expected) / len(expected)
    return math.sqrt(sum((e - mean) ** 2 for e in expected) / len(expected))


def run(args: argparse.Namespace) -> int:
    if args.data is not None:
        args.file = Path(dataset_path(args.data))
    for option, value in (("--concurrency", args.concurrency), ("--limit", args.limit)):
        if value is not None and value < 1:
            print(f"error: {option} must be >= 1", file=sys.stderr)
            return 2
    try:
        settings = settings_from_args(args)
        judge = batch_judge(settings)
        metric = ContextualUtilization(judge=judge, threshold=settings.threshold, mode=settings.mode)
        parsed = list(_labelled(read_items(args.file), args.limit))
    except (ValueError, OSError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    good = [p for p in parsed if not isinstance(p, BadLine)]
    bad = [p for p in parsed if isinstance(p, BadLine)]
    status = _check_lines(args, good, bad)
    if status is not None:
        return status
    runner = MetricRunner([metric], max_concurrency=settings.max_concurrency)
    started = time.perf_counter()
    results = asyncio.run(runner.run([line.item for line, _ in good]))
    elapsed = time.perf_counter() - started
    report = agreement([labels for _, labels in good], results)
    try:
        extra, extra_lines = extras(
            args, runner, [line.item for line, _ in good], [lab for _, lab in good], results
        )
    except (ImportError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    baseline = rmse_predicting_mean([labels for _, labels in good])
    figures = _Figures(judge, report, results, elapsed, len(bad), baseline)
    if args.json:
        print(json.dumps({**figures.record(), "file": str(args.file), **extra}))
    else:
        print("\n".join([*figures.lines(args.file), *extra_lines]))
    return 1 if bad or report.errors else 0


def _check_lines(args: argparse.Namespace, good: list[Any], bad: list[BadLine]) -> int | None:
    """Report the unreadable lines; the exit status when there is nothing to bench (no labelled or no
    readable line, or the extras' options do not fit the data), else ``None``."""
    unlabelled = not good and any(b.error == _NO_LABELS for b in bad)
    for b in bad:
        if not (unlabelled and b.error == _NO_LABELS):  # one message below instead of one per line
            report_bad_line(args.file, b)
    if unlabelled:
        print(
            f"error: {args.file}: no line has labels, so there is nothing to compare the judge with; bench "
            "needs chunk_labels and expected_score on each line (use 'ctxutil-otel evaluate' to score "
            "unlabelled data)",
            file=sys.stderr,
        )
        return 2
    if not good:
        print(f"error: {args.file}: no readable line", file=sys.stderr)
        return 1
    problem = check_extras(args, len(good))
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    return None


@dataclass(frozen=True)
class _Figures:
    """What ``bench`` reports of one run, as JSON or as text."""

    judge: object
    report: AgreementReport
    results: list[MetricEvaluationResult]
    elapsed: float
    bad_lines: int
    baseline: float | None  # score RMSE of predicting the mean expected score (rmse_predicting_mean)

    @property
    def judge_name(self) -> str:
        return str(getattr(self.judge, "name", type(self.judge).__name__))

    @property
    def rate(self) -> float | None:
        return len(self.results) / self.elapsed if self.results and self.elapsed > 0 else None

    @property
    def usage(self) -> TokenUsage:
        return sum((r.usage for r in self.results if r.usage is not None), TokenUsage())

    def record(self) -> dict[str, Any]:
        usage = self.usage
        return {
            **self.report.model_dump(mode="json"),
            "rmse_predicting_mean": self.baseline,
            "evals_per_second": self.rate,
            "elapsed_s": self.elapsed,
            "bad_lines": self.bad_lines,
            "judge_input_tokens": usage.input_tokens,
            "judge_output_tokens": usage.output_tokens,
            "judge": self.judge_name,
            "judge_model": getattr(self.judge, "model", None),
        }

    def lines(self, file: object) -> list[str]:
        rate, usage, report = self.rate, self.usage, self.report
        speed = "n/a" if rate is None else f"{rate:.0f}"
        lines = [
            f"bench {file}: judge {self.judge_name} (model {getattr(self.judge, 'model', None) or '-'}), "
            f"{len(self.results)} rows in {self.elapsed:.2f} s = {speed} evaluations/s; "
            f"{self.bad_lines} unreadable lines",
            render_table(report),
        ]
        if self.baseline is not None:
            lines.append(f"predicting the mean expected score for every row: rmse {self.baseline:.3f}")
        if report.error_types:
            lines.append(
                "errors by error.type: " + ", ".join(f"{k} {v}" for k, v in report.error_types.items())
            )
        if usage.total_tokens:
            lines.append(f"judge tokens: {usage.input_tokens} input, {usage.output_tokens} output")
        return lines
