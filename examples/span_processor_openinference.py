"""Evaluate an OpenInference-traced LangChain RAG chain with ``UtilizationSpanProcessor``: no callback
handler, one line added to the tracing setup. Runs offline: the chain replays the bundled RAGBench sample
and the default judge is the offline semantic one (learned, with one warning, without the ``semantic``
extra).

    .venv/bin/python examples/span_processor_openinference.py [--rows 5]

Needs ``openinference-instrumentation-langchain`` (in the ``test`` extra). Telemetry goes where the
OpenTelemetry environment says (``OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317`` sends spans, the
``gen_ai.evaluation.result`` log records and the metrics to a Collector); without it nothing is exported
and the script prints a summary read back from an in-memory span exporter. ``CTXUTIL_*`` variables
configure the evaluation (``CTXUTIL_SAMPLE_RATE``, ``CTXUTIL_JUDGE``, ...).
"""

from __future__ import annotations

import argparse
import sys
import warnings

from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.data import load_sample
from ctxutil_otel.demo import build_rag_chain, replay_parts
from ctxutil_otel.emit import configure_telemetry, names

# openinference-instrumentation-langchain 0.1.80 calls BaseMessage.text() as a method on langchain-core 1.x
warnings.filterwarnings("ignore", message=r"Calling \.text\(\) as a method is deprecated")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5, help="sample rows to run through the chain (1..250)")
    args = parser.parse_args(argv)

    # 1. The application's tracing setup (here: exporters from the environment, plus an in-memory copy).
    memory = InMemorySpanExporter()
    telemetry = configure_telemetry(
        service_name="rag-span-processor-example",
        console=False,
        span_processors=[SimpleSpanProcessor(memory)],
    )
    provider = telemetry.tracer_provider
    LangChainInstrumentor().instrument(tracer_provider=provider)

    # 2. The one addition: the span processor, emitting on the same providers.
    processor = UtilizationSpanProcessor(
        tracer_provider=provider,
        meter_provider=telemetry.meter_provider,
        logger_provider=telemetry.logger_provider,
    )
    provider.add_span_processor(processor)

    # 3. The application runs as usual.
    rows = load_sample(args.rows)
    chain = build_rag_chain(*replay_parts(rows))
    for row in rows:
        chain.invoke(row["query"])

    # 4. Batch jobs and examples flush before reading results (a service would just keep running).
    processor.force_flush(30_000)
    telemetry.force_flush(30_000)
    spans = memory.get_finished_spans()
    questions = {
        s.context.trace_id: str((s.attributes or {}).get("input.value", "?"))
        for s in spans
        if s.parent is None
    }
    print(f"{'evaluated span':16}  {'label':14}  {'score':>5}  {'relevant':>8}  {'utilized':>8}  question")
    for span in spans:
        if span.name != names.SPAN_EVALUATION:
            continue
        attributes = span.attributes or {}
        score = attributes.get(names.ATTR_EVALUATION_SCORE_VALUE)
        parent = f"{span.parent.span_id:016x}" if span.parent else "-"
        print(
            f"{parent:16}  {attributes.get(names.ATTR_EVALUATION_SCORE_LABEL, '?')!s:14}  "
            f"{score if score is None else format(score, '.2f')!s:>5}  "
            f"{attributes.get(names.ATTR_TOTAL_RELEVANT_CHUNKS, '-')!s:>8}  "
            f"{attributes.get(names.ATTR_UTILIZED_CHUNKS, '-')!s:>8}  "
            f"{questions.get(span.context.trace_id, '?')[:60]}"
        )
    print(processor.stats())
    telemetry.shutdown(10_000)  # shuts the processor, hence the evaluator, down too
    return 0


if __name__ == "__main__":
    sys.exit(main())
