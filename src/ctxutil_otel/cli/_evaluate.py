"""``ctxutil-otel evaluate FILE.jsonl``: score every line of a dataset and write one result per line."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, TextIO

from ..judges import TokenUsage
from ..metric import ContextualUtilization, MetricEvaluationResult, MetricRunner
from ._io import (
    BadLine,
    Line,
    add_judge_options,
    batch_judge,
    quiet_broken_pipe,
    read_items,
    report_bad_line,
    settings_from_args,
)

__all__ = ["register", "summarise"]

BROKEN_PIPE_STATUS = 141
"""Exit status when the reader of stdout went away (``evaluate ... | head``): 128 + SIGPIPE, as a shell
tool killed by the signal reports."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="score a JSONL dataset (query, retrieved_content, actual_output per line; Ragas and DeepEval "
        "field names accepted)",
        description="Score every line of FILE.jsonl; write one JSON result per line; print a summary. "
        "A line that cannot be read or written is reported with its number and the rest continue; exit "
        "status 1 if any line was bad or any evaluation failed. Options left unset take their CTXUTIL_* "
        "variable, else the default (docs/settings.md).",
    )
    parser.add_argument("file", type=Path, metavar="FILE.jsonl")
    add_judge_options(parser)
    parser.add_argument("--out", type=Path, default=None, help="write results here (default: stdout)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(func=run)


def summarise(results: list[MetricEvaluationResult], bad_lines: int, unwritten: int = 0) -> str:
    """A short summary: lines per label, mean score, pass rate, pooled utilization (utilized relevant
    chunks / relevant chunks over the scored lines, the figure a dashboard plots), failures by
    ``error_type`` and the judge tokens spent."""
    labels = Counter(r.label for r in results)
    scored = [r for r in results if r.score is not None]
    not_written = f", {unwritten} not written" if unwritten else ""
    lines = [f"evaluated {len(results)} lines ({bad_lines} unreadable{not_written})"]
    if scored:
        mean = sum(r.score for r in scored if r.score is not None) / len(scored)
        passed = sum(1 for r in scored if r.passed)
        relevant = sum(r.signals.total_relevant_chunks for r in scored)
        utilized = sum(r.signals.utilized_chunks for r in scored)
        lines.append(f"mean score {mean:.3f} over {len(scored)} scored lines")
        lines.append(f"pass rate {passed / len(scored):.1%}")
        lines.append(
            f"pooled utilization {utilized / relevant:.3f} ({utilized} of {relevant} relevant chunks)"
        )
    lines.append(
        "labels: " + ", ".join(f"{k}={labels.get(k, 0)}" for k in ("pass", "fail", "not_applicable", "error"))
    )
    failures = Counter(r.error_type or "unknown" for r in results if r.label == "error")
    if failures:
        lines.append("failures: " + ", ".join(f"{k}={n}" for k, n in sorted(failures.items())))
    usage = sum((r.usage for r in results if r.usage is not None), TokenUsage())
    if usage.total_tokens:
        lines.append(f"judge tokens: {usage.input_tokens} input, {usage.output_tokens} output")
    return "\n".join(lines)


def _records(good: list[Line], results: list[MetricEvaluationResult], path: Path) -> tuple[list[str], int]:
    """One JSON line per result; a result that cannot be written as UTF-8 JSON is reported as a bad line."""
    out, bad = [], 0
    for line, result in zip(good, results, strict=True):
        try:
            text = json.dumps({"line": line.number, **result.model_dump(mode="json")}, ensure_ascii=False)
            text.encode("utf-8")
        except (ValueError, TypeError) as exc:  # UnicodeEncodeError is a ValueError
            report_bad_line(path, BadLine(line.number, f"result not written ({type(exc).__name__})"))
            bad += 1
            continue
        out.append(text + "\n")
    return out, bad


def run(args: argparse.Namespace) -> int:
    if args.concurrency is not None and args.concurrency < 1:
        print("error: --concurrency must be >= 1", file=sys.stderr)
        return 2
    if args.out is not None and args.out.resolve() == args.file.resolve():
        print("error: --out names the input file; choose another path", file=sys.stderr)
        return 2
    try:
        settings = settings_from_args(args)
        metric = ContextualUtilization(
            judge=batch_judge(settings), threshold=settings.threshold, mode=settings.mode
        )
        parsed = list(read_items(args.file))
    except (ValueError, OSError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    good = [p for p in parsed if isinstance(p, Line)]
    bad = [p for p in parsed if isinstance(p, BadLine)]
    for b in bad:
        report_bad_line(args.file, b)
    try:  # open the output before spending judge calls, so a bad path fails first
        out: TextIO = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
    except OSError as exc:
        print(f"error: --out: {exc}", file=sys.stderr)
        return 2
    runner = MetricRunner([metric], max_concurrency=settings.max_concurrency)
    results = asyncio.run(runner.run([p.item for p in good], show_progress=not args.no_progress))
    records, unwritten = _records(good, results, args.file)
    try:
        written = quiet_broken_pipe(lambda stream: stream.writelines(records), out)
    finally:
        if args.out:
            out.close()
    print(summarise(results, len(bad), unwritten), file=sys.stderr)
    if not written:
        return BROKEN_PIPE_STATUS
    errors = sum(1 for r in results if r.label == "error")
    return 1 if bad or unwritten or errors else 0
