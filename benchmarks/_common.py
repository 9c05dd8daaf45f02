"""Shared parts of the benchmarks: resident memory, OpenTelemetry providers that export nowhere, statistics.

Nothing here is part of the package; the benchmark scripts import it as a sibling module (they are run as
``.venv/bin/python benchmarks/<script>.py``, which puts ``benchmarks/`` on ``sys.path``).
"""

from __future__ import annotations

import gc
import math
import os
import select
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from ctxutil_otel.demo._chain import build_rag_chain, replay_parts
from ctxutil_otel.demo._replay import ReplayChatModel
from ctxutil_otel.worker import EvaluatorStats

__all__ = [
    "JudgeServer",
    "NullLogExporter",
    "NullSpanExporter",
    "Providers",
    "cpu_count",
    "median",
    "percentile",
    "rag_chain",
    "rss_bytes",
    "run_block",
    "settled_rss_bytes",
    "stats_counts",
]


def rss_bytes() -> int | None:
    """Resident set size of this process in bytes: ``psutil`` when installed, else ``VmRSS`` of
    ``/proc/self/status`` (Linux); ``None`` when neither is available."""
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        return int(psutil.Process().memory_info().rss)
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024  # the kernel reports kB
    except OSError:
        return None
    return None


def settled_rss_bytes() -> int | None:
    """:func:`rss_bytes` after a full garbage collection (so that unreachable cycles do not count)."""
    gc.collect()
    return rss_bytes()


class NullSpanExporter(SpanExporter):
    """Accepts every batch and sends it nowhere (the batch processor still does all of its work)."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class NullLogExporter(LogRecordExporter):
    """Accepts every batch of log records and sends it nowhere."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, batch: Sequence[object]) -> LogRecordExportResult:  # type: ignore[override]
        self.exported += len(batch)
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@dataclass
class Providers:
    """Real OpenTelemetry SDK providers that export nowhere: spans and log records go through the SDK's
    batch processors to null exporters, metrics are aggregated for an in-memory reader that is never read.
    """

    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    spans: NullSpanExporter
    logs: NullLogExporter

    @classmethod
    def create(cls) -> Providers:
        spans, logs = NullSpanExporter(), NullLogExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(BatchSpanProcessor(spans))
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(BatchLogRecordProcessor(logs))
        meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
        return cls(tracer_provider, meter_provider, logger_provider, spans, logs)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ``values`` by the nearest-rank method; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return float(ordered[rank - 1])


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


_SERVER_CODE = """
import sys
from tests.support.openai_server import OpenAICompatServer, verdict_handler
with OpenAICompatServer(verdict_handler(delay_s=float(sys.argv[1]))) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin (or exits)
"""


class JudgeServer:
    """``tests/support/openai_server.py``'s OpenAI-compatible server answering valid verdicts after
    ``delay_s`` seconds, run in a child process so that its CPU (request parsing, JSON) is not charged to
    the process being measured: a production judge is remote. Context manager; ``base_url`` is
    ``http://127.0.0.1:<port>/v1``.

    Raises:
        RuntimeError: when the child does not report its address within 30 s.
    """

    def __init__(self, delay_s: float, root: str) -> None:
        self.delay_s = delay_s
        self._root = root
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""

    def __enter__(self) -> JudgeServer:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVER_CODE, repr(self.delay_s)],
            cwd=self._root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        ready, _, _ = select.select([self._process.stdout], [], [], 30)
        line = self._process.stdout.readline().strip() if ready else ""
        if not line.startswith("http://127.0.0.1:"):
            self.__exit__(None, None, None)
            raise RuntimeError(f"the judge server did not start (got {line!r})")
        self.base_url = line
        return self

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


# --- the chain under test ------------------------------------------------------------------------------


class SleepingReplayModel(ReplayChatModel):
    """The demo's replaying chat model, waiting ``delay_s`` seconds (``time.sleep``: the GIL is released,
    as while a real model call waits on the network) before each answer."""

    delay_s: float = 0.001

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        time.sleep(self.delay_s)
        return super()._generate(messages, stop, run_manager, **kwargs)


def rag_chain(rows: Sequence[Mapping[str, Any]], model_delay_s: float) -> Any:
    """The demo's LCEL RAG chain (``{"context": retriever | join, "question": passthrough} | prompt | model
    | StrOutputParser()``) over ``rows`` of the bundled sample, with a :class:`SleepingReplayModel`."""
    retriever, _ = replay_parts(rows)
    model = SleepingReplayModel(answers={r["query"]: r["actual_output"] for r in rows}, delay_s=model_delay_s)
    return build_rag_chain(retriever, model)


def run_block(
    chain: Any, questions: Sequence[str], n: int, config: Any, latencies: list[float]
) -> tuple[float, float]:
    """Invoke ``chain`` ``n`` times (questions cycled) with ``config``; append each invocation's seconds to
    ``latencies``. Returns the block's wall seconds and the CPU seconds of the calling thread."""
    invoke, clock, count = chain.invoke, time.perf_counter, len(questions)
    cpu = time.thread_time()
    start = clock()
    for i in range(n):
        began = clock()
        invoke(questions[i % count], config)
        latencies.append(clock() - began)
    return clock() - start, time.thread_time() - cpu


def stats_counts(stats: EvaluatorStats) -> dict[str, int]:
    """:class:`EvaluatorStats` as flat counts: ``dropped.<reason>`` and ``failed.<error.type>`` keys."""
    out = {
        "captured": stats.captured,
        "sampled_out": stats.sampled_out,
        "evaluated": stats.evaluated,
        "not_applicable": stats.not_applicable,
        "in_flight": stats.in_flight,
        "queue_size": stats.queue_size,
    }
    out.update({f"dropped.{reason}": n for reason, n in stats.dropped.items()})
    out.update({f"failed.{error}": n for error, n in stats.failed.items()})
    return out
