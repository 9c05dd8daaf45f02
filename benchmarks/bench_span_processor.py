"""Cost of ``UtilizationSpanProcessor.on_end`` for a span that is not part of a RAG interaction, measured
beside the SDK's own ``BatchSpanProcessor.on_end`` in the same run (issue 4: at most 2 µs median added
per span).

    .venv/bin/python benchmarks/bench_span_processor.py [--rounds 300] [--calls 1000]

Each case calls ``on_end`` ``--calls`` times on one real ended SDK span (an HTTP client span with seven
attributes, child of a request span), timed with ``time.perf_counter_ns`` per round; the figure is the
median over ``--rounds`` rounds of the per-call time. Cases:

* ``batch_span_processor``: the SDK's ``BatchSpanProcessor.on_end`` (queue large enough never to fill,
  worker never woken, so only the enqueue is timed);
* ``ctxutil_idle``: the processor with nothing buffered (the common case);
* ``ctxutil_busy``: the processor while 1,000 other RAG traces are buffered (a trace-id lookup and the
  lazy TTL clock read are added);
* ``ctxutil_in_buffered_trace``: the span belongs to a trace with a buffered retrieval (a non-RAG span
  inside a sampled RAG trace: the trace's entry is found, then one more lookup shows the span encloses
  nothing buffered);
* ``ctxutil_marked_sampled_out``: a span carrying a RAG marker attribute in a trace the sampler rejects
  (``sample_rate`` 0.01: the decision is taken from the trace id before anything is read).

The evaluator behind the processor uses a recording emitter and is never reached by these spans.
Prints one line per case and the ratio of each ctxutil case to the BatchSpanProcessor.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable, Mapping

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.capture.spans._model import Retrieval
from ctxutil_otel.worker import Evaluator

_WARMUP = 10_000
HTTP_ATTRIBUTES: dict[str, AttributeValue] = {
    "http.request.method": "GET",
    "url.full": "https://api.example.com/v1/items?page=2",
    "server.address": "api.example.com",
    "server.port": 443,
    "http.response.status_code": 200,
    "network.protocol.version": "1.1",
    "user_agent.original": "python-httpx/0.27",
}


class _NullExporter(SpanExporter):
    def export(self, spans: object) -> SpanExportResult:
        return SpanExportResult.SUCCESS


class _NullEmitter:
    def emit(self, *args: object) -> None:
        pass

    def observe(self, *args: object) -> None:
        pass


def _ended_span(attributes: Mapping[str, AttributeValue]) -> ReadableSpan:
    """An ended HTTP client span, child of a (still open) request span: not a local root."""
    tracer = TracerProvider().get_tracer("bench")
    with tracer.start_as_current_span("POST /ask"), tracer.start_as_current_span("GET /v1/items") as span:
        span.set_attributes(attributes)
    assert isinstance(span, ReadableSpan)
    return span


def _median_ns(call: Callable[[], None], rounds: int, calls: int) -> float:
    per_call: list[float] = []
    loop = range(calls)
    gc.disable()
    try:
        for _ in range(rounds):
            start = time.perf_counter_ns()
            for _ in loop:
                call()
            per_call.append((time.perf_counter_ns() - start) / calls)
    finally:
        gc.enable()
    return statistics.median(per_call)


def _busy(processor: UtilizationSpanProcessor, traces: int) -> None:
    """Buffer one retrieval in each of ``traces`` other (sampled) traces, waiting for their roots."""
    for i in range(1, traces + 1):
        context = SpanContext(trace_id=i, span_id=i, is_remote=False, trace_flags=TraceFlags(1))
        record = Retrieval("q", None, "genai")
        processor._buffer.end_span(record, context, parent_span_id=i + 1, start_ns=0, end_ns=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args(argv)

    total = args.rounds * args.calls + _WARMUP + 1
    batch = BatchSpanProcessor(
        _NullExporter(), max_queue_size=total, max_export_batch_size=total, schedule_delay_millis=3_600_000
    )
    evaluator = Evaluator(emitter=_NullEmitter(), sample_rate=0.01)
    idle = UtilizationSpanProcessor(evaluator)
    busy = UtilizationSpanProcessor(evaluator)
    _busy(busy, 1000)
    span = _ended_span(HTTP_ATTRIBUTES)
    inside = UtilizationSpanProcessor(evaluator)
    retriever = SpanContext(span.context.trace_id, span.context.span_id + 1, is_remote=False)
    inside._buffer.end_span(Retrieval("q", None, "genai"), retriever, span.context.span_id + 2, 0, 0)
    marked = _ended_span({**HTTP_ATTRIBUTES, "gen_ai.operation.name": "chat"})
    while marked.context.trace_id & ((1 << 64) - 1) < round(0.01 * 2**64):  # make it a sampled-out trace
        marked = _ended_span({**HTTP_ATTRIBUTES, "gen_ai.operation.name": "chat"})

    cases: dict[str, Callable[[], None]] = {
        "batch_span_processor": lambda: batch.on_end(span),
        "ctxutil_idle": lambda: idle.on_end(span),
        "ctxutil_busy": lambda: busy.on_end(span),
        "ctxutil_in_buffered_trace": lambda: inside.on_end(span),
        "ctxutil_marked_sampled_out": lambda: idle.on_end(marked),
    }
    for call in cases.values():  # warm up
        for _ in range(_WARMUP):
            call()
    results = {name: _median_ns(call, args.rounds, args.calls) for name, call in cases.items()}
    assert idle.pending_traces == 0 and busy.pending_traces == 1000 and inside.pending_traces == 1
    assert evaluator.stats().captured == 0

    bsp = results["batch_span_processor"]
    print(
        f"python {sys.version.split()[0]}, {args.rounds} rounds x {args.calls} calls, median per on_end call"
    )
    for name, value in results.items():
        ratio = "" if name == "batch_span_processor" else f"  ({value / bsp:.2f}x BatchSpanProcessor.on_end)"
        print(f"{name:28s} {value:8.0f} ns{ratio}")
    evaluator.shutdown(1000)
    batch.shutdown()  # type: ignore[no-untyped-call]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
