"""Memory and CPU of one offline evaluation as the chunk count grows: each judge at n/4 and n chunks.

    .venv/bin/python benchmarks/bench_chunk_count.py [--chunks 20000] [--judges semantic learned]

Each measurement runs in a fresh child process: ``ContextualUtilization(judge=...)`` is built and warmed on
4 chunks, then one interaction with the given number of short distinct chunks is evaluated; the child
reports its peak RSS growth over the warmed process (``ru_maxrss``) and the evaluation's process CPU time.
Prints both at n/4 and n and their ratios: about 4 is linear in the chunk count, about 16 quadratic (a few
MiB of growth can land in memory the process already holds: the memory ratio reads high when n/4 is small).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence

_CHILD = """
import asyncio, json, resource, sys, time
from ctxutil_otel import ContextualUtilization, DatasetItem
judge, n = sys.argv[1], int(sys.argv[2])
metric = ContextualUtilization(judge=judge)
def item(k):
    # model_construct: the live paths and DatasetItem take at most MAX_CHUNKS (10,000) chunks; this
    # measures the judge past it (valid strings: nothing else is skipped)
    chunks = ["chunk %d about water and other things" % i for i in range(k)]
    return DatasetItem.model_construct(query="What is the boiling point of water?",
                                       actual_output="Water boils at 100 C.", retrieved_content=chunks,
                                       id=None, metadata={})
asyncio.run(metric.execute(item(4)))
warm, big = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, item(n)
cpu = time.process_time()
asyncio.run(metric.execute(big))
cpu = time.process_time() - cpu
print(json.dumps([(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - warm) / 1024, cpu]))
"""


def measure(judge: str, n: int) -> tuple[float, float]:
    """Peak RSS growth (MiB) and CPU seconds of one evaluation of ``n`` chunks, in a fresh process."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, judge, str(n)], capture_output=True, text=True, check=True
    )
    rss, cpu = json.loads(done.stdout.strip().splitlines()[-1])
    return float(rss), float(cpu)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--chunks", type=int, default=20000, help="n (also measured: n/4)")
    parser.add_argument("--judges", nargs="+", default=["semantic", "learned"])
    args = parser.parse_args(argv)
    for judge in args.judges:
        small, large = measure(judge, args.chunks // 4), measure(judge, args.chunks)
        for n, (rss, cpu) in ((args.chunks // 4, small), (args.chunks, large)):
            print(f"{judge:<8} {n:>6} chunks: peak RSS +{rss:6.1f} MiB, CPU {cpu:5.2f} s")
        ratio_rss = large[0] / small[0] if small[0] > 0 else float("nan")
        print(f"{judge:<8} n / (n/4): memory x{ratio_rss:.1f}, CPU x{large[1] / small[1]:.1f} (4 = linear)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
