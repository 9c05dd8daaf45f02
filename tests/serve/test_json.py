"""OTLP/HTTP with JSON encoding (issue 9 item 10): the OTLP spec's JSON mapping (hex trace/span ids,
enum integers, lowerCamelCase keys, unknown fields ignored), the same limits and errors as protobuf, and
answers in the request's encoding. The JSON is what the real SDK's protobuf encoder produces, rendered
with protobuf's json_format plus the spec's hex ids (as the Collector's OTLP/JSON exporter sends it)."""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Callable
from typing import Any

from google.protobuf import json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from .conftest import RagTrace, Served
from .test_errors import post


def otlp_json(trace: RagTrace) -> dict[str, Any]:
    """The trace as OTLP/JSON: camelCase keys, enums as integers, ids as hex."""
    document: dict[str, Any] = json_format.MessageToDict(
        encode_spans(trace.spans), use_integers_for_enums=True
    )
    for resource_spans in document["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return document


def _json_answer(body: bytes, message: Any) -> Any:
    json_format.Parse(body, message)
    return message


def test_json_export_is_evaluated_and_answered_in_json(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    document = otlp_json(rag_trace)
    document["resourceSpans"][0]["someFutureField"] = {"x": 1}  # unknown fields are ignored
    span = document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert isinstance(span["kind"], int)  # enums as integers, as the spec requires
    status, headers, body = post(served, json.dumps(document).encode(), content_type="application/json")
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {}  # an ExportTraceServiceResponse without partial success
    served.flush()
    (evaluation,) = served.sink.spans("contextual_utilization")
    assert int.from_bytes(evaluation.trace_id, "big") == rag_trace.trace_id  # the hex ids were read
    assert int.from_bytes(evaluation.parent_span_id, "big") == rag_trace.llm_span_id
    assert served.receiver.stats().spans_accepted == len(rag_trace.spans)


def test_json_gzip_and_partial_success(make_served: Callable[..., Served], rag_trace: RagTrace) -> None:
    served = make_served()
    document = otlp_json(rag_trace)
    document["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "abcd"  # 2 bytes: rejected
    body = gzip.compress(json.dumps(document).encode())
    status, _, answer = post(
        served, body, content_type="application/json; charset=utf-8", headers={"Content-Encoding": "gzip"}
    )
    assert status == 200
    partial = json.loads(answer)["partialSuccess"]
    assert int(partial["rejectedSpans"]) == 1 and partial["errorMessage"]


def test_bad_json_is_a_400_in_json_naming_the_problem(make_served: Callable[..., Served]) -> None:
    served = make_served()
    cases = [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "not"),
        (json.dumps({"resourceSpans": "x"}).encode(), "resourceSpans"),
        (
            json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}).encode(),
            "traceId: expected a hex string",
        ),
        (b"\xff\xfe", "not JSON"),
    ]
    for payload, expected in cases:
        status, headers, body = post(served, payload, content_type="application/json")
        assert status == 400, payload[:40]
        assert headers["content-type"] == "application/json"
        answer = _json_answer(body, status_pb2.Status())
        assert answer.code == code_pb2.INVALID_ARGUMENT
        assert expected in answer.message, (answer.message, expected)
        bad = error_details_pb2.BadRequest()
        assert answer.details[0].Unpack(bad) and bad.field_violations[0].field == "body"
    assert served.receiver.stats().requests == {"bad_request": len(cases)}
    assert served.evaluator.stats().captured == 0


def test_json_has_the_same_size_limit(make_served: Callable[..., Served], rag_trace: RagTrace) -> None:
    payload = json.dumps(otlp_json(rag_trace)).encode()
    served = make_served(max_request_bytes=len(payload) - 1)
    status, headers, body = post(served, payload, content_type="application/json")
    assert status == 413
    assert headers["content-type"] == "application/json"
    assert "exceeds the limit" in _json_answer(body, status_pb2.Status()).message
