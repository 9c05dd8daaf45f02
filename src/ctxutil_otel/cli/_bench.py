"""``ctxutil-otel bench FILE.jsonl``: measure a judge against labelled data (quality and speed).

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
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..metric import ContextualUtilization, EvaluationMode, MetricRunner
from ..metric._agreement import AgreementFigures, AgreementReport, LabelledRow, agreement
from ._io import BadLine, Line, build_judge, read_items, report_bad_line

__all__ = ["register", "render_table"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="compare a judge with labelled data (chunk_labels, expected_score): quality and speed",
        description="Run the Contextual Utilization metric over FILE.jsonl and compare it with the "
        "labels: score RMSE/MAE, relevance and utilization precision/recall/F1, pooled utilization, "
        "low-utilization AUROC, per subset, and evaluations per second. A bad line is reported on "
        "stderr with its number and the rest continue; exit status 1 if any line was bad or any "
        "evaluation failed.",
    )
    parser.add_argument("file", type=Path, metavar="FILE.jsonl")
    parser.add_argument("--judge", choices=("lexical", "openai"), default="lexical")
    parser.add_argument("--model", default=None, help="judge model for --judge openai (default gpt-4o-mini)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --judge openai")
    parser.add_argument("--limit", type=int, default=None, help="only the first N non-blank lines")
    parser.add_argument("--concurrency", type=int, default=8, help="evaluations in flight (default 8)")
    parser.add_argument("--mode", choices=[m.value for m in EvaluationMode], default="granular")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.set_defaults(func=run)


def _labelled(
    parsed: Iterator[Line | BadLine], limit: int | None
) -> Iterator[tuple[Line, LabelledRow] | BadLine]:
    for count, entry in enumerate(parsed):
        if limit is not None and count >= limit:
            return
        if isinstance(entry, BadLine):
            yield entry
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


_HEADER = (
    f"{'subset':<10} {'n':>5} {'scored':>6} {'errors':>6} {'rmse':>6} {'mae':>6} "
    f"{'rel_P':>6} {'rel_R':>6} {'rel_F1':>6} {'use_P':>6} {'use_R':>6} {'use_F1':>6} "
    f"{'pooled':>6} {'expect':>6} {'low':>4} {'AUROC':>6}"
)


def _row(name: str, f: AgreementFigures) -> str:
    return (
        f"{name:<10} {f.n:>5} {f.scored:>6} {f.errors:>6} {_fmt(f.rmse)} {_fmt(f.mae)} "
        f"{_fmt(f.relevance_precision)} {_fmt(f.relevance_recall)} {_fmt(f.relevance_f1)} "
        f"{_fmt(f.utilization_precision)} {_fmt(f.utilization_recall)} {_fmt(f.utilization_f1)} "
        f"{_fmt(f.pooled_predicted)} {_fmt(f.pooled_expected)} {f.low_rows:>4} {_fmt(f.low_auroc)}"
    )


def render_table(report: AgreementReport) -> str:
    """The figures as a fixed-width text table: one line per subset, then ``overall``."""
    lines = [_HEADER]
    lines.extend(_row(name, figures) for name, figures in report.per_subset.items())
    lines.append(_row("overall", report))
    lines.append(
        "rmse/mae over scored rows; rel_* over all chunks; use_* over chunks labelled relevant; "
        "pooled = utilized/relevant chunks (predicted vs expected); low = rows with expected < 0.5, "
        "AUROC = how well a lower score flags them"
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    for option, value in (("--concurrency", args.concurrency), ("--limit", args.limit)):
        if value is not None and value < 1:
            print(f"error: {option} must be >= 1", file=sys.stderr)
            return 2
    try:
        judge = build_judge(args.judge, args.model, args.base_url)
        metric = ContextualUtilization(judge=judge, mode=args.mode)
        parsed = list(_labelled(read_items(args.file), args.limit))
    except (ValueError, OSError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    good = [p for p in parsed if not isinstance(p, BadLine)]
    bad = [p for p in parsed if isinstance(p, BadLine)]
    for b in bad:
        report_bad_line(args.file, b)

    runner = MetricRunner([metric], max_concurrency=args.concurrency)
    started = time.perf_counter()
    results = asyncio.run(runner.run([line.item for line, _ in good]))
    elapsed = time.perf_counter() - started
    report = agreement([labels for _, labels in good], results)
    judge_name = str(getattr(judge, "name", type(judge).__name__))
    judge_model = getattr(judge, "model", None)
    rate = len(results) / elapsed if results and elapsed > 0 else None
    # Judge tokens, failed evaluations included (what a paid judge bills).
    tokens_in = sum(r.usage.input_tokens for r in results if r.usage is not None)
    tokens_out = sum(r.usage.output_tokens for r in results if r.usage is not None)
    per_eval = (tokens_in + tokens_out) / len(results) if results else None

    if args.json:
        record = {
            **report.model_dump(mode="json"),
            "evals_per_second": rate,
            "judge_tokens": {"input": tokens_in, "output": tokens_out},
            "tokens_per_evaluation": per_eval,
            "elapsed_s": elapsed,
            "bad_lines": len(bad),
            "judge": judge_name,
            "judge_model": judge_model,
            "file": str(args.file),
        }
        print(json.dumps(record))
    else:
        speed = "n/a" if rate is None else f"{rate:.0f}"
        print(
            f"bench {args.file}: judge {judge_name} (model {judge_model or '-'}), "
            f"{len(results)} rows in {elapsed:.2f} s = {speed} evaluations/s; {len(bad)} unreadable lines"
        )
        if tokens_in or tokens_out:
            print(
                f"judge tokens: {tokens_in} input + {tokens_out} output = "
                f"{per_eval:.0f} per evaluation (failed evaluations included)"
            )
        print(render_table(report))
    return 1 if bad or report.errors else 0
