"""``ctxutil-otel evaluate FILE.jsonl``: score every line of a dataset and write one result per line."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from ..metric import ContextualUtilization, EvaluationMode, MetricEvaluationResult, MetricRunner
from ._io import BadLine, Line, build_judge, read_items, report_bad_line

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="score a JSONL dataset (query, retrieved_content, actual_output per line)",
        description="Score every line of FILE.jsonl; write one JSON result per line; print a summary. "
        "A bad line is reported with its number and the rest continue; exit status 1 if any line failed.",
    )
    parser.add_argument("file", type=Path, metavar="FILE.jsonl")
    parser.add_argument("--judge", choices=("learned", "lexical", "openai"), default="learned")
    parser.add_argument("--model", default=None, help="judge model for --judge openai (default gpt-4o-mini)")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --judge openai")
    parser.add_argument("--threshold", type=float, default=0.5, help="pass threshold in [0, 1] (default 0.5)")
    parser.add_argument("--mode", choices=[m.value for m in EvaluationMode], default="granular")
    parser.add_argument("--out", type=Path, default=None, help="write results here (default: stdout)")
    parser.add_argument("--concurrency", type=int, default=8, help="evaluations in flight (default 8)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(func=run)


def summarise(results: list[MetricEvaluationResult], bad_lines: int) -> str:
    """One-paragraph summary: count per label, mean score over scored lines, pass rate."""
    labels = Counter(r.label for r in results)
    scores = [r.score for r in results if r.score is not None]
    passed = sum(1 for r in results if r.passed)
    lines = [f"evaluated {len(results)} lines ({bad_lines} unreadable)"]
    if scores:
        lines.append(f"mean score {sum(scores) / len(scores):.3f} over {len(scores)} scored lines")
        lines.append(f"pass rate {passed / len(scores):.1%}")
    lines.append(
        "labels: " + ", ".join(f"{k}={labels.get(k, 0)}" for k in ("pass", "fail", "not_applicable", "error"))
    )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.concurrency < 1:
        print("error: --concurrency must be >= 1", file=sys.stderr)
        return 2
    if args.out is not None and args.out.resolve() == args.file.resolve():
        print("error: --out names the input file; choose another path", file=sys.stderr)
        return 2
    try:
        metric = ContextualUtilization(
            judge=build_judge(args.judge, args.model, args.base_url), threshold=args.threshold, mode=args.mode
        )
        parsed = list(read_items(args.file))
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    good = [p for p in parsed if isinstance(p, Line)]
    bad = [p for p in parsed if isinstance(p, BadLine)]
    for b in bad:
        report_bad_line(args.file, b)
    try:  # open the output before spending judge calls, so a bad path fails first
        out = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
    except OSError as exc:
        print(f"error: --out: {exc}", file=sys.stderr)
        return 2
    runner = MetricRunner([metric], max_concurrency=args.concurrency)
    results = asyncio.run(runner.run([p.item for p in good], show_progress=not args.no_progress))
    try:
        for line, result in zip(good, results, strict=True):
            record = {"line": line.number, **result.model_dump(mode="json")}
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    finally:
        if args.out:
            out.close()
    print(summarise(results, len(bad)), file=sys.stderr)
    errors = sum(1 for r in results if r.label == "error")
    return 1 if bad or errors else 0
