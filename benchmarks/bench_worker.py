"""What one evaluation costs the evaluation worker, and how many a CPU budget allows, with the OpenAI judge.

    .venv/bin/python benchmarks/bench_worker.py [--evaluations 300] [--judge-delay-ms 200] [--worker process]
                                                 [--fractions 0 0.03 0.05] [--json PATH]

For each ``max_worker_cpu_fraction`` in ``--fractions`` (0 = no budget), one :class:`Evaluator` with
``OpenAIJudge`` against the OpenAI-compatible test server (answering after ``--judge-delay-ms``, in a child
process, as a remote judge is) and a real :class:`Emitter` on SDK providers that export nowhere is given
``--evaluations`` interactions of the bundled sample at once (queue large enough, rate cap lifted,
``max_concurrency`` 8), after 20 untimed ones. Reported: the worker thread's CPU per evaluation (its own
CPU clock, ``pthread_getcpuclockid``), of it the CPU inside ``Emitter.emit``, the evaluations finished
per second, and the worker's share of one core. The application's threads are idle here (the main thread
waits in ``force_flush``): under a busy application the worker's CPU per evaluation is higher (see
``bench_callback.py``, where it shares the GIL with a chain).

Use it to choose ``max_worker_cpu_fraction``: evaluations/s at a budget is about budget / CPU per evaluation.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from _common import JudgeServer, Providers

from ctxutil_otel import Evaluator
from ctxutil_otel.capture import Interaction
from ctxutil_otel.data import load_sample
from ctxutil_otel.emit import Emitter

ROOT = Path(__file__).resolve().parent.parent


class TimedEmitter:
    """The real emitter, with the worker thread's CPU spent inside ``emit`` added up."""

    def __init__(self, inner: Emitter) -> None:
        self.inner = inner
        self.cpu_s = 0.0

    def emit(self, *args: Any, **kwargs: Any) -> None:
        began = time.thread_time()
        self.inner.emit(*args, **kwargs)
        self.cpu_s += time.thread_time() - began

    def observe(self, *args: Any) -> None:
        self.inner.observe(*args)


def interactions(rows: list[dict[str, Any]], n: int) -> list[Interaction]:
    return [
        Interaction(
            query=row["query"],
            answer=row["actual_output"],
            documents=list(row["retrieved_content"]),
            trace_id=random.getrandbits(128) or 1,
        )
        for row in (rows[i % len(rows)] for i in range(n))
    ]


def measure(
    fraction: float, base_url: str, rows: list[dict[str, Any]], n: int, worker: str = "thread"
) -> dict[str, Any]:
    providers = Providers.create()
    emitter = TimedEmitter(
        Emitter(
            tracer_provider=providers.tracer_provider,
            meter_provider=providers.meter_provider,
            logger_provider=providers.logger_provider,
        )
    )
    evaluator = Evaluator(
        emitter=emitter,
        judge="openai",
        judge_base_url=base_url,
        judge_api_key="bench-key",
        judge_model="judge-model",
        sample_rate=1.0,
        max_evaluations_per_second=0,
        max_worker_cpu_fraction=fraction,
        max_queue_size=n + 100,
        worker=worker,
    )
    try:
        for item in interactions(rows, 20):  # warm-up: imports, connections, the budget's estimate
            evaluator.admit(item.trace_id).submit(item)
        evaluator.force_flush(120_000)
        thread = evaluator._engine.thread  # the worker thread: its CPU clock is what the budget paces
        assert thread.ident is not None
        clock = time.pthread_getcpuclockid(thread.ident)
        cpu0, emit0, wall0 = time.clock_gettime(clock), emitter.cpu_s, time.monotonic()
        for item in interactions(rows, n):
            evaluator.admit(item.trace_id).submit(item)
        if not evaluator.force_flush(600_000):
            raise RuntimeError("the evaluations did not finish within 600 s")
        cpu, wall = time.clock_gettime(clock) - cpu0, time.monotonic() - wall0
        stats = evaluator.stats()
        if stats.failed or stats.dropped:
            raise RuntimeError(f"evaluations failed or were dropped: {stats}")
        return {
            "worker": worker,
            "max_worker_cpu_fraction": fraction,
            "worker_cpu_ms_per_evaluation": cpu / n * 1000,
            "emit_cpu_ms_per_evaluation": (emitter.cpu_s - emit0) / n * 1000,
            "evaluations_per_s": n / wall,
            "worker_share_of_a_core": cpu / wall,
        }
    finally:
        evaluator.shutdown(5_000)
        providers.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--evaluations", type=int, default=300, help="timed evaluations per fraction")
    parser.add_argument("--judge-delay-ms", type=float, default=200.0, help="judge server answer delay")
    parser.add_argument(
        "--fractions", type=float, nargs="+", default=[0.0, 0.03, 0.05], help="budgets (0 = none)"
    )
    parser.add_argument(
        "--worker",
        choices=["thread", "process"],
        default="thread",
        help="where the judge runs (docs/worker.md)",
    )
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)
    rows = load_sample()[:50]
    results = []
    with JudgeServer(args.judge_delay_ms / 1000, str(ROOT)) as server:
        for fraction in args.fractions:
            row = measure(fraction, server.base_url, rows, args.evaluations, args.worker)
            results.append(row)
            print(
                f"{args.worker} worker, budget {fraction:g}: worker CPU "
                f"{row['worker_cpu_ms_per_evaluation']:.2f} ms per "
                f"evaluation (emit {row['emit_cpu_ms_per_evaluation']:.2f} ms), "
                f"{row['evaluations_per_s']:.1f} evaluations/s, "
                f"worker {row['worker_share_of_a_core']:.1%} of a core",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
