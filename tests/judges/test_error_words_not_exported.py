"""Issue 10 item 10: with content capture off, the exported explanation of a judge failure is our own words.

A judge server that quotes the query or part of the API key in its error message must not put them into
spans, log records or logs: the explanation says the error type and the HTTP status; what the server wrote
stays in ``MetricEvaluationResult.error_message`` (local only, never exported). Real ``OpenAIJudge`` over
real HTTP to the local test server; the real ``Emitter`` on the real SDK with in-memory exporters.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxutil_otel import DatasetItem
from ctxutil_otel.emit import Emitter
from ctxutil_otel.metric import ContextualUtilization
from tests.support.openai_server import error_reply

from .conftest import API_KEY, MakeJudgeFn, ServeFn

QUERY = "What is the account balance of Jane Q. Customer?"
CHUNKS = ["Jane's balance is 120 dollars.", "Banks open at nine."]
# A server echoing the user's query and a middle piece of the key (which key redaction cannot catch).
ECHO = f"cannot process prompt '{QUERY}' for key fragment {API_KEY[5:14]}"


@pytest.fixture
def exporters() -> Iterator[tuple[Emitter, InMemorySpanExporter, InMemoryLogRecordExporter]]:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider(shutdown_on_exit=False)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)
    emitter = Emitter(
        tracer_provider=tracer_provider, meter_provider=meter_provider, logger_provider=logger_provider
    )
    yield emitter, spans, logs
    for provider in (tracer_provider, meter_provider, logger_provider):
        provider.shutdown()


@pytest.mark.parametrize(("status", "error_type"), [(400, "http_4xx"), (500, "http_5xx")])
async def test_server_words_stay_local(
    serve: ServeFn,
    make_judge: MakeJudgeFn,
    exporters: tuple[Emitter, InMemorySpanExporter, InMemoryLogRecordExporter],
    caplog: pytest.LogCaptureFixture,
    status: int,
    error_type: str,
) -> None:
    from tests.worker.conftest import interaction  # the worker tests' Interaction builder

    server = serve(lambda request: error_reply(status, ECHO))
    metric = ContextualUtilization(judge=make_judge(server, max_retries=0))
    item = DatasetItem(query=QUERY, actual_output="It is 120 dollars.", retrieved_content=CHUNKS)
    with caplog.at_level(logging.DEBUG):
        result = await metric.execute(item)

    assert (result.label, result.error_type) == ("error", error_type)
    assert result.explanation == f"Judge openai failed ({error_type}, HTTP {status})."
    assert result.error_message is not None and "Jane Q. Customer" in result.error_message  # kept locally

    emitter, spans, logs = exporters
    emitter.emit(interaction(query=QUERY, documents=CHUNKS), result, 0.01, item=item)
    exported: list[object] = []
    for span in spans.get_finished_spans():
        exported.extend((span.attributes or {}).values())
    for record in logs.get_finished_logs():
        exported.extend((record.log_record.attributes or {}).values())
        exported.append(record.log_record.body)
    assert exported, "nothing was emitted"
    text = " ".join(str(v) for v in exported) + " " + caplog.text
    assert "Jane" not in text and API_KEY[5:14] not in text and "cannot process" not in text
