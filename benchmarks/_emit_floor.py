"""What emitting one evaluation costs with the OpenTelemetry SDK's own work alone (issue 13's floor).

:func:`emit_floor` runs, on the calling thread, hot (back to back, after a warm-up): ``Emitter.emit`` of
real lexical-judge results of the bundled sample, then the very OpenTelemetry SDK calls those emits made
(recorded once: ``Tracer.start_span`` + ``Span.end`` of both spans, ``Logger.emit`` of a new ``LogRecord``
with the same fields for both records, each metric point's ``record``/``add`` with its attributes),
replayed without any of our code. The difference is our share of emission; the replay is what the SDK
needs per evaluation whatever we do, on this machine, hot. Then ``Emitter.emit`` paced as the CPU budget
runs it (``PACED_*``: a few results per wake-up, a sleep in between): what the caches lost during the sleep
costs on top. Nothing here is part of the package.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from _common import Providers
from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import Logger
from opentelemetry.sdk.metrics._internal.instrument import _Counter, _Histogram
from opentelemetry.sdk.trace import Tracer

from ctxutil_otel import Settings
from ctxutil_otel.capture import Interaction
from ctxutil_otel.emit import Emitter
from ctxutil_otel.judges._from_settings import build_judge
from ctxutil_otel.metric import ContextualUtilization
from ctxutil_otel.worker._convert import to_dataset_item

__all__ = ["emit_floor"]

Call = Callable[[], object]

#: The paced figure: this many evaluations emitted this many at a time, after a sleep of this many seconds
#: each time (4 results per wake-up at 60/s, the benchmark's queue of 4 at the issue's target).
PACED_EVALUATIONS, PACED_BATCH, PACED_SLEEP_S = 400, 4, 0.066


def _results(rows: Sequence[dict[str, Any]]) -> list[tuple[Interaction, Any]]:
    settings = Settings(judge="lexical")
    metric = ContextualUtilization(judge=build_judge(settings), threshold=settings.threshold)
    pairs = []
    for row in rows:
        interaction = Interaction(
            query=row["query"],
            answer=row["actual_output"],
            documents=list(row["retrieved_content"]),
            trace_id=random.getrandbits(128) or 1,
        )
        item = to_dataset_item(interaction)
        pairs.append((interaction, asyncio.run(metric.execute(item))))  # type: ignore[arg-type]
    return pairs


def _record_sdk_calls(emit: Call) -> list[Call]:
    """The SDK calls ``emit()`` makes, as calls that repeat them (patched in for the one call)."""
    calls: list[Call] = []
    start_span, log_emit = Tracer.start_span, Logger.emit
    record, add = _Histogram.record, _Counter.add

    def span(self: Tracer, name: str, *args: Any, **kwargs: Any) -> Any:
        made = start_span(self, name, *args, **kwargs)
        end = made.end

        def replay() -> None:
            start_span(self, name, *args, **kwargs).end()

        calls.append(replay)
        made.end = lambda end_time=None: end(end_time)  # type: ignore[method-assign]
        return made

    def log(self: Logger, item: LogRecord, *args: Any, **kwargs: Any) -> None:
        fields = {
            "timestamp": item.timestamp,
            "context": item.context,
            "severity_number": item.severity_number,
            "severity_text": item.severity_text,
            "attributes": dict(item.attributes or {}),
            "event_name": item.event_name,
        }
        calls.append(lambda: log_emit(self, LogRecord(**fields)))
        log_emit(self, item, *args, **kwargs)

    def histogram(self: Any, value: Any, attributes: Any = None, *args: Any, **kwargs: Any) -> None:
        calls.append(lambda: record(self, value, attributes))
        record(self, value, attributes, *args, **kwargs)

    def counter(self: Any, value: Any, attributes: Any = None, *args: Any, **kwargs: Any) -> None:
        calls.append(lambda: add(self, value, attributes))
        add(self, value, attributes, *args, **kwargs)

    Tracer.start_span, Logger.emit = span, log  # type: ignore[method-assign,assignment]
    _Histogram.record, _Counter.add = histogram, counter  # type: ignore[method-assign]
    try:
        emit()
    finally:
        Tracer.start_span, Logger.emit = start_span, log_emit  # type: ignore[method-assign]
        _Histogram.record, _Counter.add = record, add  # type: ignore[method-assign]
    return calls


def _cpu_ms_per(run: Call, n: int) -> float:
    began = time.thread_time()
    run()
    return (time.thread_time() - began) / n * 1e3


def emit_floor(rows: Sequence[dict[str, Any]], n: int = 2000) -> dict[str, float | int]:
    """``{"emit_ms", "sdk_ms", "sdk_calls", "emit_paced_ms"}``: CPU ms per evaluation of ``Emitter.emit``
    and of its SDK calls alone (module docstring), hot, on this thread; ``sdk_calls`` per evaluation; CPU
    ms per evaluation of ``Emitter.emit`` paced (about 27 s)."""
    providers = Providers.create()
    try:
        emitter = Emitter(
            tracer_provider=providers.tracer_provider,
            meter_provider=providers.meter_provider,
            logger_provider=providers.logger_provider,
        )
        pairs = _results(rows)
        replays = [_record_sdk_calls(lambda p=p: emitter.emit(p[0], p[1], 0.2)) for p in pairs]  # type: ignore[misc]
        count = len(pairs)

        def emits() -> None:
            for i in range(n):
                emitter.emit(*pairs[i % count], 0.2)

        def sdk() -> None:
            for i in range(n):
                for call in replays[i % count]:
                    call()

        def paced() -> None:  # as the CPU budget runs it: a few results per wake-up, then a sleep
            for i in range(0, PACED_EVALUATIONS, PACED_BATCH):
                time.sleep(PACED_SLEEP_S)
                for j in range(i, i + PACED_BATCH):
                    emitter.emit(*pairs[j % count], 0.2)

        emits(), sdk()  # warm
        hot, floor = [], []
        for _ in range(5):  # interleaved; the least of each (the others met more interference)
            hot.append(_cpu_ms_per(emits, n))
            floor.append(_cpu_ms_per(sdk, n))
        return {
            "emit_ms": min(hot),
            "sdk_ms": min(floor),
            "sdk_calls": sum(len(r) for r in replays) / count,
            "emit_paced_ms": _cpu_ms_per(paced, PACED_EVALUATIONS),
        }
    finally:
        providers.shutdown()
