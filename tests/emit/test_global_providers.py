"""Global providers: an Emitter created before the application sets its providers still delivers.

OpenTelemetry's global providers can be set once per process, so this runs in a fresh interpreter
(a real subprocess, no mocks) and reports what the in-memory exporters received as JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from tests.support.env import environ_without_settings

SCRIPT = textwrap.dedent(
    """
    import json, logging
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry import trace
    from ctxutil_otel import DatasetItem
    from ctxutil_otel.capture import Interaction
    from ctxutil_otel.emit import Emitter, configure_telemetry
    from ctxutil_otel.metric import ContextualUtilization
    import asyncio

    emitter = Emitter()  # before any provider exists: proxies
    emitter.observe(lambda: {("evaluated", None): 1}, lambda: 0)

    spans, logs, reader = InMemorySpanExporter(), InMemoryLogRecordExporter(), InMemoryMetricReader()
    handle = configure_telemetry(
        console=False,
        set_global=True,
        span_processors=[SimpleSpanProcessor(spans)],
        log_record_processors=[SimpleLogRecordProcessor(logs)],
        metric_readers=[reader],
    )
    warnings = []
    logging.getLogger("ctxutil_otel.emit").addHandler(
        type("H", (logging.Handler,), {"emit": lambda self, r: warnings.append(r.getMessage())})()
    )
    second = configure_telemetry(console=False, set_global=True)

    item = DatasetItem(query="What is Python?", actual_output="Python is a high-level language.",
                       retrieved_content=["Python is a high-level programming language."])
    result = asyncio.run(ContextualUtilization().execute(item))
    emitter.emit(Interaction(query=item.query, answer=item.actual_output, documents=item.retrieved_content,
                             trace_id=1), result, 0.1)
    data = reader.get_metrics_data()
    metric_names = sorted(
        m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
    )
    print(json.dumps({
        "spans": sorted(s.name for s in spans.get_finished_spans()),
        "events": [r.log_record.event_name for r in logs.get_finished_logs()],
        "metrics": metric_names,
        "is_global": handle.is_global,
        "second_is_global": second.is_global,
        "warned": any("already set" in w for w in warnings),
        "global_is_handle": trace.get_tracer_provider() is handle.tracer_provider,
    }))
    second.shutdown(1000)
    handle.shutdown(1000)
    """
)


def test_emitter_created_before_global_providers_still_delivers() -> None:
    env = environ_without_settings()  # no exporter from outside
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False, env=env
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["spans"] == ["contextual_utilization", "rag.interaction"]
    assert report["events"] == ["gen_ai.evaluation.result"] * 2  # utilization and relevancy
    assert {
        "gen_ai.evaluation.score",
        "ctxutil.chunks.relevant",
        "ctxutil.chunks.utilized",
        "ctxutil.evaluation.duration",
        "ctxutil.evaluations",
        "ctxutil.queue.size",
    } <= set(report["metrics"])
    assert report["is_global"] is True
    assert report["global_is_handle"] is True
    assert report["second_is_global"] is False
    assert report["warned"] is True
