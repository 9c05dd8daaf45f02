"""Evaluations per second of the offline judges, in one process, through the metric (issue 11's >= 500).

    .venv/bin/python benchmarks/bench_judges.py [FILE.jsonl] [--rounds 3] [--limit N]

Runs ``ContextualUtilization`` + ``MetricRunner`` over the rows (default: the bundled sample) with the
learned and the lexical judge, alternating, ``--rounds`` times each, and prints each judge's best
evaluations/s (wall clock and process CPU time) and the learned/lexical ratio measured in the same run. On
a shared machine the CPU-time rate is the steadier figure: it does not count time the process waited for
a core. The machine's load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ctxutil_otel import ContextualUtilization, DatasetItem, MetricRunner
from ctxutil_otel.cli._io import Line, read_items
from ctxutil_otel.data import sample_path
from ctxutil_otel.judges import LearnedJudge, LexicalJudge


def rate(judge: object, items: list[DatasetItem]) -> tuple[float, float]:
    runner = MetricRunner([ContextualUtilization(judge=judge)])  # type: ignore[arg-type]
    wall, cpu = time.perf_counter(), time.process_time()
    asyncio.run(runner.run(items))
    return len(items) / (time.perf_counter() - wall), len(items) / (time.process_time() - cpu)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", type=Path, nargs="?", default=Path(sample_path()))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    items = [entry.item for entry in read_items(args.file) if isinstance(entry, Line)][: args.limit]
    judges = {"learned": LearnedJudge(), "lexical": LexicalJudge()}
    load_before = os.getloadavg()
    for judge in judges.values():  # warm caches (stemmer, compiled trees) outside the timing
        rate(judge, items[:20])
    best: dict[str, tuple[float, float]] = {name: (0.0, 0.0) for name in judges}
    for _ in range(args.rounds):
        for name, judge in judges.items():
            wall, cpu = rate(judge, items)
            best[name] = (max(best[name][0], wall), max(best[name][1], cpu))
    for name, (wall, cpu) in best.items():
        print(f"{name:<8} {len(items)} rows: {wall:7.0f} evaluations/s wall, {cpu:7.0f} per CPU-second")
    ratio_wall = best["learned"][0] / best["lexical"][0]
    ratio_cpu = best["learned"][1] / best["lexical"][1]
    print(f"learned / lexical: {ratio_wall:.2f} (wall), {ratio_cpu:.2f} (CPU)")
    # The machine's load (1-minute average) before and after: absolute rates mean little on a busy machine.
    after = os.getloadavg()[0]
    print(f"load average (1 min): {load_before[0]:.2f} before, {after:.2f} after; {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
