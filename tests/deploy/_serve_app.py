"""``ctxutil-otel serve``'s wiring with its metrics scraped by Prometheus, for the two-sender test.

The same parts as ``ctxutil_otel.cli._serve.run``: settings, ``build_emitter``, ``Evaluator``,
``UtilizationSpanProcessor`` and the real ``TraceReceiver`` (OTLP/HTTP on a free 127.0.0.1 port). Only the
metric exporter differs: ``opentelemetry-exporter-prometheus`` on a free port instead of OTLP to a Collector
(no Collector binary here; its ``prometheus`` exporter applies the same naming rules), with the evaluator's
own Resource ``service.name=ctxutil-evaluator`` as in a real deployment. Prints ``{"otlp_http_port": ...,
"metrics_port": ...}``, then answers each ``flush`` line on stdin with the evaluator's stats after a
``force_flush``; exits on ``exit`` or end of input.
"""

from __future__ import annotations

import json
import sys

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server

from ctxutil_otel._settings import Settings
from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.emit._from_settings import build_emitter
from ctxutil_otel.serve import TraceReceiver
from ctxutil_otel.worker import Evaluator

EVALUATOR_SERVICE = "ctxutil-evaluator"


def main() -> int:
    resource = Resource.create({"service.name": EVALUATOR_SERVICE})
    meter_provider = MeterProvider(metric_readers=[PrometheusMetricReader()], resource=resource)
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    metrics_server, _thread = start_http_server(0, addr="127.0.0.1")
    settings = Settings(max_worker_cpu_fraction=0, max_evaluations_per_second=0)
    emitter = build_emitter(
        settings,
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
    )
    evaluator = Evaluator(emitter=emitter, settings=settings)
    processor = UtilizationSpanProcessor(evaluator)
    receiver = TraceReceiver(processor, host="127.0.0.1", grpc_port=None, http_port=0).start()
    print(
        json.dumps({"otlp_http_port": receiver.http_port, "metrics_port": metrics_server.server_port}),
        flush=True,
    )
    try:
        for line in sys.stdin:
            if line.strip() != "flush":
                break
            flushed = processor.force_flush(30_000)
            stats = evaluator.stats()
            print(
                json.dumps({"flushed": flushed, "evaluated": stats.evaluated, "captured": stats.captured}),
                flush=True,
            )
    finally:
        receiver.stop(5)  # flushes and shuts the processor down
        meter_provider.shutdown()
        metrics_server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
