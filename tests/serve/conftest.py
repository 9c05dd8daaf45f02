"""Fixtures for the ``serve`` tests: everything real, nothing mocked.

* ``sink``: the second OTLP receiver (tests/support/otlp_receiver.py, gRPC + HTTP on 127.0.0.1) that
  receives the evaluation results ``serve`` exports.
* ``make_served``: an in-process :class:`~ctxutil_otel.serve.TraceReceiver` on free ports, with the real
  span processor, Evaluator (offline LexicalJudge unless told otherwise), Emitter and
  ``configure_telemetry`` exporting over OTLP/gRPC to ``sink`` (as the CLI does, through
  ``OTEL_EXPORTER_OTLP_ENDPOINT``).

The developer's ``CTXUTIL_*`` / ``OTEL_*`` variables are kept out by the suite-wide fixture in
tests/conftest.py (which also lifts the worker's CPU budget, as for every test).
* ``rag_spans``: a RAG trace recorded by a real SDK tracer with OpenInference attribute shapes (a CHAIN
  root with RETRIEVER and LLM children), ready to hand to the SDK's real ``OTLPSpanExporter``.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from ctxutil_otel import ContextualUtilization, DatasetItem, LexicalJudge, MetricEvaluationResult
from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.emit import Emitter, TelemetryHandle, configure_telemetry
from ctxutil_otel.serve import TraceReceiver
from ctxutil_otel.worker import Evaluator
from tests.support.otlp_receiver import OTLPReceiver

EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

QUERY = "What are the benefits of green tea?"
ANSWER = "Green tea is rich in antioxidants called catechins, and these antioxidants reduce inflammation."
CHUNKS = (
    "Green tea contains antioxidants called catechins.",
    "The antioxidants in green tea reduce inflammation.",
    "Green tea may boost metabolism.",
    "Tea originated in China thousands of years ago.",
)


@pytest.fixture
def sink() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as receiver:
        yield receiver


@dataclass
class Served:
    receiver: TraceReceiver
    processor: UtilizationSpanProcessor
    evaluator: Evaluator
    telemetry: TelemetryHandle
    sink: OTLPReceiver

    @property
    def grpc_port(self) -> int:
        port = self.receiver.grpc_port
        assert port is not None
        return port

    @property
    def http_port(self) -> int:
        port = self.receiver.http_port
        assert port is not None
        return port

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def flush(self) -> None:
        """Evaluate everything submitted, then export the results to the sink."""
        assert self.processor.force_flush(15_000)
        assert self.telemetry.force_flush(15_000)


@pytest.fixture
def make_served(sink: OTLPReceiver, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Served]]:
    """``make_served(judge=None, receiver_kwargs..., **evaluator_settings)``; stopped after the test."""
    made: list[Served] = []

    def make(*, judge: Any = None, metric: Any = None, **kwargs: Any) -> Served:
        receiver_keys = {
            "token",
            "tls",
            "max_request_bytes",
            "retry_after_s",
            "header_timeout_s",
            "request_timeout_s",
            "min_request_rate",
            "max_connections",
            "grpc_port",
            "http_port",
        }
        receiver_kwargs = {k: kwargs.pop(k) for k in list(kwargs) if k in receiver_keys}
        receiver_kwargs.setdefault("grpc_port", 0)
        receiver_kwargs.setdefault("http_port", 0)
        kwargs.setdefault("max_evaluations_per_second", 0)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", sink.grpc_endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
        telemetry = configure_telemetry(service_name="ctxutil-serve-test", console=False)
        emitter = Emitter(
            tracer_provider=telemetry.tracer_provider,
            meter_provider=telemetry.meter_provider,
            logger_provider=telemetry.logger_provider,
        )
        if metric is None:
            metric = ContextualUtilization(judge=judge or LexicalJudge())
        evaluator = Evaluator(metric, emitter=emitter, **kwargs)
        processor = UtilizationSpanProcessor(evaluator)
        try:
            receiver = TraceReceiver(processor, telemetry=telemetry, **receiver_kwargs).start()
        except BaseException:
            processor.shutdown(0)
            telemetry.shutdown(0)
            raise
        served = Served(receiver, processor, evaluator, telemetry, sink)
        made.append(served)
        return served

    yield make
    for served in made:
        served.receiver.stop(10.0)


# --- the RAG trace -------------------------------------------------------------------------------
@dataclass
class RagTrace:
    spans: Sequence[ReadableSpan]
    trace_id: int
    llm_span_id: int

    def request_bytes(self) -> bytes:
        """The OTLP ``ExportTraceServiceRequest`` the SDK's exporters send for these spans."""
        return bytes(encode_spans(self.spans).SerializeToString())


def record_rag_trace(service: str = "rag-app") -> RagTrace:
    """A CHAIN root with RETRIEVER and LLM children (OpenInference attribute shapes), recorded with a
    real SDK tracer into memory."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("openinference.instrumentation.langchain", "0.1.0")
    documents: dict[str, str | float] = {}
    for i, text in enumerate(CHUNKS):
        documents[f"retrieval.documents.{i}.document.content"] = text
        documents[f"retrieval.documents.{i}.document.id"] = f"doc-{i}"
        documents[f"retrieval.documents.{i}.document.score"] = 0.9 - i / 10
    with tracer.start_as_current_span(
        "RetrievalQA",
        attributes={"openinference.span.kind": "CHAIN", "input.value": QUERY, "output.value": ANSWER},
    ) as root:
        with tracer.start_as_current_span(
            "VectorStoreRetriever",
            attributes={"openinference.span.kind": "RETRIEVER", "input.value": QUERY, **documents},
        ):
            pass
        with tracer.start_as_current_span(
            "ChatOpenAI",
            kind=SpanKind.CLIENT,
            attributes={
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o-mini",
                "llm.input_messages.0.message.role": "system",
                "llm.input_messages.0.message.content": "Answer from the context.\n" + "\n".join(CHUNKS),
                "llm.input_messages.1.message.role": "user",
                "llm.input_messages.1.message.content": QUERY,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": ANSWER,
            },
        ) as llm:
            pass
    provider.shutdown()
    return RagTrace(
        memory.get_finished_spans(), root.get_span_context().trace_id, llm.get_span_context().span_id
    )


@pytest.fixture
def rag_trace() -> RagTrace:
    return record_rag_trace()


async def expected_result() -> MetricEvaluationResult:
    """What the metric itself says about the same interaction (computed, not hard-coded)."""
    metric = ContextualUtilization(judge=LexicalJudge())
    return await metric.execute(
        DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=list(CHUNKS))
    )


def grpc_export(
    target: str, payload: bytes, metadata: Sequence[tuple[str, str]] = (), timeout: float = 10.0
) -> bytes:
    """Call TraceService/Export with raw bytes (to send what a real exporter would not)."""
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(EXPORT_PATH, request_serializer=None, response_deserializer=None)
        response: bytes = call(payload, metadata=tuple(metadata), timeout=timeout)
        return response


EXPORT_HEADERS = (
    "POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
    "Content-Length: {length}\r\n\r\n"
)
"""The head of an OTLP/HTTP export request; ``.format(length=...)`` sets its Content-Length."""


def connect(served: Served) -> socket.socket:
    """A raw TCP connection to the served HTTP port (client timeout 10 s, a bound only)."""
    return socket.create_connection(("127.0.0.1", served.http_port), timeout=10)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (client timeout: 10 s, a bound only)."""
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received
