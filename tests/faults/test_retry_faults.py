"""Fault injection: the same OTLP spans delivered again (issue 24 row 5). An exporter that times out waiting
for the answer sends its batch again although ``serve`` took it: 3 distinct turns gave captured 6,
evaluated 5 (one turn 3 times) and a phantom ``dropped/shutdown``. A record whose span (trace id, span id)
was buffered already is now ignored, within the buffer's lifetime (``run_ttl_s``; docs/serve.md).

Real parts: a ``TraceReceiver`` with the real span processor and evaluator; the requests are the recorded
RAG trace's OTLP bytes (a CHAIN root, a RETRIEVER with 4 chunks, an LLM span) under fresh trace ids,
posted over real HTTP and gRPC, as an exporter's retry would post them: the same bytes again.
"""

from __future__ import annotations

import http.client
import os
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.serve.conftest import CHUNKS, Served, grpc_export, record_rag_trace
from tests.support.otlp_receiver import attributes_of

_TEMPLATE = ExportTraceServiceRequest.FromString(record_rag_trace().request_bytes())


def _traces(count: int) -> list[bytes]:
    """``count`` trace ids (16 bytes each), one RAG turn each."""
    return [os.urandom(16) for _ in range(count)]


def _request(trace_ids: Sequence[bytes], *, roots: bool | None = None) -> bytes:
    """One export of the recorded turn under each trace id: every span (``roots=None``), only the roots
    (``True``) or only the others (``False``)."""
    request = ExportTraceServiceRequest()
    request.CopyFrom(_TEMPLATE)
    spans = request.resource_spans[0].scope_spans[0].spans
    template = list(spans)
    del spans[:]
    for trace_id in trace_ids:
        for span in template:
            if roots is None or roots == (not span.parent_span_id):
                copy = spans.add()
                copy.CopyFrom(span)
                copy.trace_id = trace_id
    return bytes(request.SerializeToString())


def _post(served: Served, body: bytes) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    try:
        connection.request(
            "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
        )
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def _evaluations(served: Served) -> list[dict[str, Any]]:
    return [attributes_of(span) for span in served.sink.spans("contextual_utilization")]


def _stop_and_check_exactly_once(served: Served, turns: int) -> None:
    """Everything evaluated once, then stopped: nothing left buffered to be dropped at shutdown."""
    served.flush()
    evaluations = _evaluations(served)
    assert len(evaluations) == turns
    assert all(e["ctxutil.total_chunks"] == len(CHUNKS) for e in evaluations), evaluations
    assert served.receiver.stop(20.0)
    stats = served.evaluator.stats()
    assert (stats.captured, stats.evaluated, stats.dropped, stats.failed) == (turns, turns, {}, {}), stats


def test_turns_delivered_again_are_evaluated_once(make_served: Callable[..., Served]) -> None:
    served = make_served()
    bodies = [_request([trace_id]) for trace_id in _traces(3)]
    for body in bodies:
        assert _post(served, body) == 200
    served.flush()
    for body in bodies:  # the exporter's retries, after the turns were evaluated
        assert _post(served, body) == 200
    _stop_and_check_exactly_once(served, 3)


def test_a_retry_arriving_before_the_roots_is_not_buffered_twice(make_served: Callable[..., Served]) -> None:
    # The batch of retrievals and generations is delivered twice before the batch holding the roots: the
    # copies were buffered beside the originals, and each turn was judged with its chunks twice (8).
    served = make_served()
    trace_ids = _traces(3)
    first = _request(trace_ids, roots=False)
    assert _post(served, first) == 200
    grpc_export(served.grpc_target, first)  # the retry, over the other transport
    assert _post(served, _request(trace_ids, roots=True)) == 200
    assert _post(served, _request(trace_ids)) == 200  # and the whole trace once more
    _stop_and_check_exactly_once(served, 3)
