"""Configure exporters and sampling in code instead of through environment variables.

    python examples/configure_exporters_and_sampling.py [OTLP_ENDPOINT]

* Your own OpenTelemetry providers (here: OTLP over gRPC when an endpoint is given, else console),
  passed explicitly to the Emitter, so nothing global is touched.
* An Evaluator with a 50% trace-id sample, a rate cap, a bounded queue, content capture on and an
  application name on the metrics; the handler shares it (one engine per process is enough).
"""

from __future__ import annotations

import sys

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, ConsoleLogRecordExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

from ctxutil_otel import ContextualUtilization, Emitter, Evaluator, LexicalJudge, UtilizationCallbackHandler
from ctxutil_otel.data import load_sample
from ctxutil_otel.demo import build_rag_chain, replay_parts
from ctxutil_otel.emit._console import format_log_record, format_metrics, format_span


def providers(endpoint: str | None) -> tuple[TracerProvider, MeterProvider, LoggerProvider]:
    resource = Resource.create({"service.name": "rag-api", "deployment.environment.name": "example"})
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    if endpoint:
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
        )
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=True))
        )
        reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=endpoint, insecure=True))
    else:
        tracer_provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter(formatter=format_span)))
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(ConsoleLogRecordExporter(formatter=format_log_record))
        )
        reader = PeriodicExportingMetricReader(ConsoleMetricExporter(formatter=format_metrics))
    return tracer_provider, MeterProvider(metric_readers=[reader], resource=resource), logger_provider


def main(endpoint: str | None) -> int:
    tracer_provider, meter_provider, logger_provider = providers(endpoint)
    emitter = Emitter(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        capture_content=True,  # chunk/query/answer text leaves the process: only where that is allowed
        max_content_chars=200,
        application_name="rag-api",
    )
    evaluator = Evaluator(
        ContextualUtilization(judge=LexicalJudge(), threshold=0.6),
        emitter=emitter,
        sample_rate=0.5,  # deterministic by trace id: the same trace is sampled in every process
        max_evaluations_per_second=20,
        max_queue_size=256,
        max_concurrency=4,
        max_worker_cpu_fraction=0.05,  # the worker's CPU, as a share of one core: what evaluating may cost
    )  # the request threads (they share the GIL with it); over it, evaluations wait in the queue
    handler = UtilizationCallbackHandler(evaluator=evaluator)

    rows = load_sample(limit=20)
    chain = build_rag_chain(*replay_parts(rows))
    chain.batch([r["query"] for r in rows], config={"callbacks": [handler]})

    evaluator.force_flush(30_000)
    stats = evaluator.stats()
    print(stats)
    evaluator.shutdown(5_000)
    for provider in (tracer_provider, meter_provider, logger_provider):
        provider.shutdown()
    return 0 if stats.captured == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1] if len(sys.argv) > 1 else None))
