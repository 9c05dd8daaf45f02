"""Cost of ``Evaluator.record_interaction`` on the application's thread (the no-framework capture path),
measured beside what any OpenTelemetry-instrumented request already pays: one SDK span started and ended.

    .venv/bin/python benchmarks/bench_record_interaction.py [--rounds 2000] [--calls 20] [--json PATH]

Each case is called ``--calls`` times per round, timed with ``time.perf_counter_ns``; the figure is the
median over ``--rounds`` rounds of the per-call time. The rounds are short (20 calls: under 1 ms) so that the
median round is one the scheduler did not interrupt on a shared machine (200-call rounds of the span, 4 ms
each, were mostly interrupted on 2 busy cores and read twice its cost), and the rounds of all cases are
interleaved (round 1 of every case, then round 2, ...), so a slower spell falls on every case alike. Cases:

* ``span`` (the baseline): ``with tracer.start_as_current_span("POST /ask", attributes=...)`` (seven
  HTTP server attributes; a child of the open request span below) on a real ``TracerProvider`` whose
  ``BatchSpanProcessor`` exports to an exporter that drops everything (queue large enough never to fill,
  worker never woken: of the export, only the enqueue is timed);
* ``sampled_out``: ``sample_rate`` 0 (decided from the trace id before the chunks are read);
* ``rate_capped``: sampled (rate 1.0), refused by the rate cap (``max_evaluations_per_second`` 0.001: the
  bucket's one token goes in the warm-up);
* ``queued``: rate 1.0, no rate cap, queued for evaluation (5 short chunks, a short query and answer, the
  answering model, provider and retriever name);
* ``queued_metadata``: as ``queued`` with a ``metadata`` dict of 10 keys, ``metric_dimensions`` naming 2.

Each case is its own real ``Evaluator`` (``judge="lexical"``, an emitter that only counts), called with its
keyword arguments inside an open request span, as docs/no-framework.md shows (the span is opened once,
untimed: the baseline is what that span costs). The worker is not what is timed: the queue holds every call
(``max_queue_size`` above the calls made) and its CPU budget is tiny (``max_worker_cpu_fraction`` 1e-6), so
after a few evaluations in the warm-up it waits, idle, until shutdown, which counts the queued rest dropped
``shutdown``. Garbage collection is off while timing (collected once before). Prints one line per case with
its ratio to ``span``, then a ``summary:`` line to paste into docs/speed.md; ``--json`` writes the same
figures. Each case is checked, after timing, to have taken its path (the evaluators' stats).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import NullSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Tracer
from opentelemetry.util.types import AttributeValue

from ctxutil_otel.worker import Evaluator, EvaluatorStats

_WARMUP = 2_000
#: The worker's CPU budget: after its first few evaluations (the cold start) it waits for hours.
_TINY_CPU_FRACTION = 1e-6
_THROTTLE_WAIT_S = 30.0

SPAN_ATTRIBUTES: dict[str, AttributeValue] = {
    "http.request.method": "POST",
    "url.path": "/ask",
    "url.scheme": "https",
    "server.address": "rag.example.com",
    "server.port": 443,
    "network.protocol.version": "1.1",
    "user_agent.original": "python-httpx/0.27",
}
QUERY = "How long is the warranty on the X200 battery?"
CHUNKS = [
    "The X200 battery carries a two-year limited warranty from the date of purchase.",
    "Warranty claims need the original receipt and the serial number of the battery.",
    "The X200 charges fully in about ninety minutes with the supplied adapter.",
    "Batteries damaged by water or a third-party charger are not covered.",
    "Replacement batteries ship within five working days of an approved claim.",
]
ANSWER = "The X200 battery has a two-year limited warranty from the date you bought it."
METADATA: dict[str, object] = {
    "tenant": "acme",
    "user_tier": "pro",
    "locale": "en-GB",
    "session_id": "5f0c9a1e",
    "request_id": "req-000123",
    "channel": "web",
    "experiment": "b",
    "app_version": "2.4.1",
    "retry": 0,
    "region": "eu-west-1",
}
METRIC_DIMENSIONS = ("tenant", "user_tier")
CASES = ("span", "sampled_out", "rate_capped", "queued", "queued_metadata")


class _CountingEmitter:
    """Counts what the worker emits; sends nothing anywhere."""

    def __init__(self) -> None:
        self.emitted = 0

    def emit(self, *args: object) -> None:
        self.emitted += 1

    def observe(self, *args: object) -> None:
        pass


def _evaluator(emitter: _CountingEmitter, queue_size: int, **settings: Any) -> Evaluator:
    return Evaluator(
        emitter=emitter,
        judge="lexical",
        max_queue_size=queue_size,
        max_worker_cpu_fraction=_TINY_CPU_FRACTION,
        **settings,
    )


def _record(evaluator: Evaluator, metadata: dict[str, object] | None = None) -> Callable[[], object]:
    record = evaluator.record_interaction

    def call() -> object:
        return record(
            query=QUERY,
            retrieved_content=CHUNKS,
            actual_output=ANSWER,
            model="gpt-4o-mini",
            provider="openai",
            retriever_name="kb_search",
            metadata=metadata,
        )

    return call


def _span(tracer: Tracer) -> Callable[[], object]:
    start = tracer.start_as_current_span

    def call() -> object:
        with start("POST /ask", attributes=SPAN_ATTRIBUTES):
            pass
        return None

    return call


def _interleaved_medians(cases: dict[str, Callable[[], object]], rounds: int, calls: int) -> dict[str, float]:
    """Median over ``rounds`` of each case's per-call ns, the cases' rounds interleaved."""
    per_call: dict[str, list[float]] = {name: [] for name in cases}
    loop = range(calls)
    clock = time.perf_counter_ns
    gc.collect()
    gc.disable()
    try:
        for _ in range(rounds):
            for name, call in cases.items():
                start = clock()
                for _ in loop:
                    call()
                per_call[name].append((clock() - start) / calls)
    finally:
        gc.enable()
    return {name: statistics.median(values) for name, values in per_call.items()}


def _wait_throttled(evaluators: list[Evaluator]) -> None:
    """Wait until each evaluator's worker waits on its CPU budget (it took its cold-start evaluations)."""
    deadline = time.monotonic() + _THROTTLE_WAIT_S
    while not all(e.stats().cpu_throttled for e in evaluators):
        if time.monotonic() > deadline:
            raise RuntimeError("the evaluators' workers did not start waiting on their CPU budget")
        time.sleep(0.01)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)

    total = args.rounds * args.calls + _WARMUP + 1
    exporter = NullSpanExporter()
    provider = TracerProvider()
    batch = BatchSpanProcessor(
        exporter, max_queue_size=total, max_export_batch_size=total, schedule_delay_millis=3_600_000
    )
    provider.add_span_processor(batch)
    tracer = provider.get_tracer("bench")
    emitters = {name: _CountingEmitter() for name in CASES[1:]}
    evaluators = {
        "sampled_out": _evaluator(emitters["sampled_out"], total, sample_rate=0.0),
        "rate_capped": _evaluator(emitters["rate_capped"], total, max_evaluations_per_second=0.001),
        "queued": _evaluator(emitters["queued"], total, max_evaluations_per_second=0),
        "queued_metadata": _evaluator(
            emitters["queued_metadata"],
            total,
            max_evaluations_per_second=0,
            metric_dimensions=METRIC_DIMENSIONS,
        ),
    }
    cases: dict[str, Callable[[], object]] = {
        "span": _span(tracer),
        "sampled_out": _record(evaluators["sampled_out"]),
        "rate_capped": _record(evaluators["rate_capped"]),
        "queued": _record(evaluators["queued"]),
        "queued_metadata": _record(evaluators["queued_metadata"], METADATA),
    }
    # The request span record_interaction is called in (the baseline's spans open inside it too).
    with tracer.start_as_current_span("POST /ask (the request)"):
        for call in cases.values():
            for _ in range(_WARMUP):
                call()
        _wait_throttled([evaluators["queued"], evaluators["queued_metadata"]])
        results = _interleaved_medians(cases, args.rounds, args.calls)
    stats = {name: evaluator.stats() for name, evaluator in evaluators.items()}
    _check(stats, args.rounds * args.calls + _WARMUP)

    base = results["span"]
    print(
        f"python {sys.version.split()[0]}, {args.rounds} rounds x {args.calls} calls, median per call, "
        f"ratio to one SDK span (start + end, BatchSpanProcessor)"
    )
    for name, value in results.items():
        ratio = "" if name == "span" else f"  ({value / base:.2f}x span)"
        print(f"{name:16s} {value:8.0f} ns{ratio}")
    evaluated = {name: s.evaluated for name, s in stats.items()}
    print(f"evaluated by the workers (not timed, all in the warm-up): {evaluated}")
    print(_summary(results))
    if args.json is not None:
        figures = {
            "command": " ".join(sys.argv),
            "python": sys.version.split()[0],
            "rounds": args.rounds,
            "calls": args.calls,
            "results": [
                {"case": name, "median_ns": value, "ratio_to_span": value / base}
                for name, value in results.items()
            ],
            "evaluated": evaluated,
        }
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    for evaluator in evaluators.values():
        evaluator.shutdown(0)  # the queued rest: dropped shutdown
    provider.shutdown()
    return 0


_LABELS = {
    "sampled_out": "sampled out",
    "rate_capped": "refused by the rate cap",
    "queued": "queued",
    "queued_metadata": "queued with 10 metadata keys, 2 dimensions",
}


def _summary(results: dict[str, float]) -> str:
    """One line for docs/speed.md: each case in µs and as a ratio to the span."""
    base = results["span"]
    cases = ", ".join(
        f"{_LABELS[name]} {value / 1000:.1f} µs ({value / base:.2f}×)"
        for name, value in results.items()
        if name in _LABELS
    )
    return f"summary: record_interaction median per call: {cases}; one SDK span {base / 1000:.1f} µs"


def _check(stats: dict[str, EvaluatorStats], per_case: int) -> None:
    """Each case took the path it is named for (counted in the evaluator's stats)."""

    def of(name: str) -> EvaluatorStats:
        found = stats[name]
        assert found.captured == per_case, (name, found.captured)
        return found

    assert of("sampled_out").sampled_out == per_case
    assert of("rate_capped").dropped.get("rate_limited") == per_case - 1
    for name in ("queued", "queued_metadata"):
        queued = of(name)
        assert queued.queue_size + queued.in_flight + queued.evaluated == per_case, (name, queued)
        assert not queued.dropped, (name, queued.dropped)


if __name__ == "__main__":
    raise SystemExit(main())
