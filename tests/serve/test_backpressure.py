"""Back-pressure: with the evaluator's queue full, exports are refused with the OTLP retryable answer (HTTP
503 + ``Retry-After`` + ``RetryInfo``; gRPC UNAVAILABLE + ``RetryInfo``) before any span is fed, and the
SDK's real exporters wait as told and get through once the evaluator has room.

The judge is the real LexicalJudge behind a gate (a ``threading.Event`` awaited off the event loop), so
the queue fills for real."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from ctxutil_otel import LexicalJudge
from ctxutil_otel.judges import JudgeResult

from .conftest import RagTrace, Served, grpc_export, record_rag_trace
from .test_errors import post, status_of


class GatedJudge:
    """The LexicalJudge, started only once ``gate`` is set; ``entered`` is set when a judgement begins."""

    name = "lexical"
    model: str | None = None

    def __init__(self) -> None:
        self.inner = LexicalJudge()
        self.gate = threading.Event()
        self.entered = threading.Event()

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        self.entered.set()
        await asyncio.get_running_loop().run_in_executor(None, self.gate.wait)
        return await self.inner.judge(query, answer, chunks, reasons=reasons)


@pytest.fixture
def gated(make_served: Callable[..., Served]) -> Any:
    judge = GatedJudge()
    served = make_served(judge=judge, max_queue_size=1, max_concurrency=1)
    yield served, judge
    judge.gate.set()


def _fill(served: Served, judge: GatedJudge) -> None:
    """One evaluation in flight (held by the gate), one queued: the queue (size 1) is full."""
    assert post(served, record_rag_trace().request_bytes())[0] == 200
    assert judge.entered.wait(10)
    assert post(served, record_rag_trace().request_bytes())[0] == 200
    assert served.evaluator.stats().queue_size == 1


def test_full_queue_refuses_with_retryable_status(gated: Any) -> None:
    served, judge = gated
    _fill(served, judge)
    refused = record_rag_trace()

    status, headers, body = post(served, refused.request_bytes())
    assert status == 503
    assert headers["retry-after"] == "1"
    answer = status_of(body)
    assert "queue is full" in answer.message
    retry = error_details_pb2.RetryInfo()
    assert answer.details[0].Unpack(retry)
    assert retry.retry_delay.seconds == 1

    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(served.grpc_target, refused.request_bytes())
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    trailers = dict(caught.value.trailing_metadata())
    details = status_pb2.Status()
    details.ParseFromString(trailers["grpc-status-details-bin"])
    assert details.details[0].Unpack(retry) and retry.retry_delay.seconds == 1
    retry.ParseFromString(trailers["google.rpc.retryinfo-bin"])
    assert retry.retry_delay.seconds == 1

    # Refused before anything was fed: nothing was dropped, nothing of the refused trace was captured.
    stats = served.evaluator.stats()
    assert (stats.captured, dict(stats.dropped)) == (2, {})
    assert served.receiver.stats().requests["overloaded"] == 2

    judge.gate.set()
    served.flush()
    assert post(served, refused.request_bytes())[0] == 200
    served.flush()
    assert len(served.sink.spans("contextual_utilization")) == 3
    assert served.evaluator.stats().evaluated + served.evaluator.stats().not_applicable == 3


class _RetryLogged(logging.Handler):
    """Sets ``event`` when an OTLP exporter logs that it will retry (its message carries the delay)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.event = threading.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "Transient error" in message:
            self.messages.append(message)
            self.event.set()


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_real_exporter_waits_as_told_then_gets_through(gated: Any, transport: str) -> None:
    served, judge = gated
    _fill(served, judge)
    trace: RagTrace = record_rag_trace()
    if transport == "grpc":
        exporter: Any = GrpcSpanExporter(endpoint=f"http://{served.grpc_target}", insecure=True, timeout=20)
        logger = logging.getLogger("opentelemetry.exporter.otlp.proto.grpc.exporter")
    else:
        exporter = HttpSpanExporter(endpoint=f"{served.http_url}/v1/traces", timeout=20)
        logger = logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    handler = _RetryLogged()
    logger.addHandler(handler)
    results: list[SpanExportResult] = []
    sender = threading.Thread(target=lambda: results.append(exporter.export(trace.spans)))
    try:
        sender.start()
        assert handler.event.wait(15)  # refused once, the exporter is waiting to retry ...
        assert "retrying in 1.00s" in handler.messages[0]  # ... for the delay the server asked for
        judge.gate.set()  # the evaluator drains: the retry is accepted
        sender.join(20)
    finally:
        logger.removeHandler(handler)
        judge.gate.set()
        exporter.shutdown()
    assert results == [SpanExportResult.SUCCESS]
    served.flush()
    assert len(served.sink.spans("contextual_utilization")) == 3


def test_a_concurrent_stop_waits_for_the_first_and_shares_its_result(gated: Any) -> None:
    served, judge = gated
    _fill(served, judge)  # the first stop's flush waits on the gated evaluation
    first: list[bool] = []
    stopper = threading.Thread(target=lambda: first.append(served.receiver.stop(10.0)))
    stopper.start()
    receiver = served.receiver
    with receiver._cond:  # the first stop has begun (it notifies when it does)
        assert receiver._cond.wait_for(lambda: receiver._stopping, 10)
    # A second signal while the first stop flushes: it waits (here 0.2 s) and does not claim success.
    assert served.receiver.stop(0.2) is False
    judge.gate.set()
    stopper.join(15)
    assert first == [True]
    assert served.receiver.stop(0.0) is True  # later calls return the first call's result
    stats = served.evaluator.stats()
    assert stats.evaluated + stats.not_applicable == 2 and stats.queue_size == 0
