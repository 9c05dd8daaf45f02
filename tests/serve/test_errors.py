"""Bad requests get the OTLP-specified answers and the server stays up: garbage bytes (HTTP 400 with a
``google.rpc.Status`` body / gRPC INVALID_ARGUMENT), oversized requests (413 / RESOURCE_EXHAUSTED), wrong
content type (415), other signals (404 / UNIMPLEMENTED), partly malformed requests (partial success),
health endpoint."""

from __future__ import annotations

import gzip
import http.client
import logging
import zlib
from collections.abc import Callable
from typing import Any

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ctxutil_otel.serve._parsing import MAX_GZIP_MEMBERS, gunzip

from .conftest import RagTrace, Served, grpc_export

GARBAGE = b"\x00\x01 this is not a protobuf \xff\xfe"


def post(
    served: Served,
    body: bytes,
    *,
    path: str = "/v1/traces",
    content_type: str = "application/x-protobuf",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": content_type, **(headers or {})})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


def get(served: Served, path: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def status_of(body: bytes) -> status_pb2.Status:
    status = status_pb2.Status()
    status.ParseFromString(body)
    return status


def assert_alive(served: Served, trace: RagTrace) -> None:
    """Both transports still answer a valid export, and the health endpoint says ok."""
    status, _, body = post(served, trace.request_bytes())
    assert status == 200
    ExportTraceServiceResponse().ParseFromString(body)
    assert (
        grpc_export(served.grpc_target, trace.request_bytes()) == b""
    )  # an empty ExportTraceServiceResponse
    assert get(served, "/healthz") == (200, b"ok\n")


def test_garbage_bytes(
    make_served: Callable[..., Served], rag_trace: RagTrace, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ctxutil_otel.serve")
    served = make_served()
    status, headers, body = post(served, GARBAGE)
    assert status == 400
    assert headers["content-type"] == "application/x-protobuf"
    decoded = status_of(body)
    assert "not an ExportTraceServiceRequest" in decoded.message
    assert decoded.details[0].Is(error_details_pb2.BadRequest.DESCRIPTOR)

    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(served.grpc_target, GARBAGE)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "not an ExportTraceServiceRequest" in (caught.value.details() or "")

    assert_alive(served, rag_trace)
    assert served.receiver.stats().requests["bad_request"] == 2
    # Logged, but throttled: one warning for the two refusals within LOG_INTERVAL_S.
    warnings = [r for r in caplog.records if r.name == "ctxutil_otel.serve" and r.levelno == logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "ctxutil serve: 1 request(s) refused, outcome bad_request (ReceiverStats)"
    ]


def test_oversized_requests(make_served: Callable[..., Served], rag_trace: RagTrace) -> None:
    payload = rag_trace.request_bytes()
    served = make_served(max_request_bytes=len(payload) - 1)
    # HTTP: refused on the Content-Length alone, before the body is read.
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    try:
        connection.putrequest("POST", "/v1/traces")
        connection.putheader("Content-Type", "application/x-protobuf")
        connection.putheader("Content-Length", str(len(payload)))
        connection.endheaders()
        response = connection.getresponse()
        assert response.status == 413
        assert "exceeds the limit" in status_of(response.read()).message
    finally:
        connection.close()
    # A small gzip body that inflates past the limit.
    status, _, body = post(served, gzip.compress(payload), headers={"Content-Encoding": "gzip"})
    assert status == 413
    assert "decompressed" in status_of(body).message
    # gRPC: the transport's own limit.
    with pytest.raises(grpc.RpcError) as caught:
        grpc_export(served.grpc_target, payload)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert served.receiver.stats().requests["too_large"] == 2


def test_wrong_content_type_and_encoding(make_served: Callable[..., Served], rag_trace: RagTrace) -> None:
    served = make_served()
    for content_type, headers in (
        ("text/plain", {}),
        ("application/x-protobuf", {"Content-Encoding": "br"}),
    ):
        status, _, body = post(served, b"{}", content_type=content_type, headers=headers)
        assert status == 415
        assert "unsupported content type" in status_of(body).message
    status, _, body = post(served, b"not gzip", headers={"Content-Encoding": "gzip"})
    assert status == 400
    assert "not valid gzip" in status_of(body).message
    assert_alive(served, rag_trace)


def test_traces_only(make_served: Callable[..., Served]) -> None:
    served = make_served()
    status, _, body = post(served, b"", path="/v1/metrics")
    assert status == 404
    assert "traces only" in status_of(body).message
    assert get(served, "/v1/traces")[0] == 405
    with grpc.insecure_channel(served.grpc_target) as channel:
        stub = metrics_service_pb2_grpc.MetricsServiceStub(channel)
        with pytest.raises(grpc.RpcError) as caught:
            stub.Export(metrics_service_pb2.ExportMetricsServiceRequest(), timeout=10)
    assert caught.value.code() is grpc.StatusCode.UNIMPLEMENTED


def test_partly_malformed_request_is_a_partial_success(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    request = ExportTraceServiceRequest()
    request.ParseFromString(rag_trace.request_bytes())
    request.resource_spans[0].scope_spans[0].spans[0].trace_id = b"\x01\x02"
    status, _, body = post(served, request.SerializeToString())
    assert status == 200
    response = ExportTraceServiceResponse()
    response.ParseFromString(body)
    assert response.partial_success.rejected_spans == 1
    assert "trace_id must be 16 bytes, got 2" in response.partial_success.error_message

    response = ExportTraceServiceResponse()
    response.ParseFromString(grpc_export(served.grpc_target, request.SerializeToString()))
    assert response.partial_success.rejected_spans == 1

    # Every span malformed: nothing was accepted, so it is "Bad Data" (400 / INVALID_ARGUMENT).
    for span in request.resource_spans[0].scope_spans[0].spans:
        span.span_id = b""
    status, _, body = post(served, request.SerializeToString())
    assert status == 400
    assert status_of(body).code == code_pb2.INVALID_ARGUMENT
    stats = served.receiver.stats()
    assert stats.spans_rejected == 1 + 1 + len(rag_trace.spans)
    assert stats.spans_accepted == 2 * (len(rag_trace.spans) - 1)


def test_empty_request_is_a_success(make_served: Callable[..., Served]) -> None:
    served = make_served()
    status, _, body = post(served, b"")
    assert (status, body) == (200, b"")
    assert grpc_export(served.grpc_target, b"") == b""


def test_health_endpoint(make_served: Callable[..., Served]) -> None:
    served = make_served(token="secret-token")
    assert get(served, "/healthz") == (200, b"ok\n")  # probes need no token
    assert get(served, "/nope")[0] == 404
    served.receiver.stop(5.0)
    assert not served.receiver.accepting
    assert served.receiver.export(b"").outcome == "unavailable"


def test_gzip_body_of_several_members(make_served: Callable[..., Served], rag_trace: RagTrace) -> None:
    # RFC 1952 section 2.2: a gzip file is a series of members; a decoder reads them all (Python's
    # gzip.decompress and Go's compress/gzip do). Split anywhere, the members inflate to the whole request.
    payload = rag_trace.request_bytes()
    half = len(payload) // 2
    body = gzip.compress(payload[:half]) + gzip.compress(payload[half:])
    status, _, answer = post(served := make_served(), body, headers={"Content-Encoding": "gzip"})
    assert (status, answer) == (200, b"")
    assert served.receiver.stats().spans_accepted == len(rag_trace.spans)
    # A second member past the limit is still too large; a broken second member is not valid gzip.
    small = make_served(max_request_bytes=len(payload) - 1)
    status, _, answer = post(small, body, headers={"Content-Encoding": "gzip"})
    assert status == 413
    assert "decompressed" in status_of(answer).message
    status, _, answer = post(served, body + b"\x1f\x8b\x08garbage", headers={"Content-Encoding": "gzip"})
    assert status == 400
    assert "not valid gzip" in status_of(answer).message


def test_empty_gzip_body_is_not_valid_gzip(make_served: Callable[..., Served]) -> None:
    served = make_served()
    for body in (b"", b"\0\0\0\0"):
        status, _, answer = post(served, body, headers={"Content-Encoding": "gzip"})
        assert status == 400
        assert "not valid gzip" in status_of(answer).message


def test_unknown_route_is_quoted_without_its_query(make_served: Callable[..., Served]) -> None:
    # A query string may carry a token or content: the 404 names the path alone.
    served = make_served()
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    try:
        connection.request("GET", "/nope?token=abc")
        response = connection.getresponse()
        assert response.status == 404
        message = status_of(response.read()).message
    finally:
        connection.close()
    assert message == "no route '/nope'"
    status, _, body = post(served, b"", path="/v1/metrics?token=abc")
    assert status == 404
    message = status_of(body).message
    assert message.startswith("no route '/v1/metrics': ")
    assert "token" not in message
    # A long path is cut (the request line may be 64 KiB).
    status, _, body = post(served, b"", path="/" + "a" * 1000)
    assert status == 404
    assert status_of(body).message.startswith("no route '/" + "a" * 199 + "...': ")
    assert served.receiver.stats().requests["not_found"] == 3


def test_a_known_path_with_the_other_method_is_405_naming_the_allowed_one(
    make_served: Callable[..., Served],
) -> None:
    served = make_served()
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    try:
        connection.request("GET", "/v1/traces")
        response = connection.getresponse()
        assert (response.status, response.getheader("Allow")) == (405, "POST")
        assert status_of(response.read()).message == "GET is not allowed on '/v1/traces': use POST"
    finally:
        connection.close()
    status, headers, _ = post(served, b"", path="/healthz")
    assert (status, headers["allow"]) == (405, "GET")
    assert served.receiver.stats().requests["method_not_allowed"] == 2
    assert "not_found" not in served.receiver.stats().requests


def test_many_member_gzip_is_refused_with_bounded_work(make_served: Callable[..., Served]) -> None:
    # Issue 10 item 5: ~210,000 empty gzip members in 4 MiB cost ~14 s of CPU (one inflater and a copy of
    # the rest of the body per member). Refused at the member bound, and the bound itself is the work
    # counter: the parser never runs more than MAX_GZIP_MEMBERS inflaters (checked on gunzip directly).
    empty_member = gzip.compress(b"", mtime=0)
    body = empty_member * (4 * 1024 * 1024 // len(empty_member))  # 209,715 members, within 4 MiB
    with pytest.raises(ValueError, match=f"more than {MAX_GZIP_MEMBERS} members"):
        gunzip(body, 4 * 1024 * 1024)
    inflaters = 0
    real = zlib.decompressobj

    def counting(*args: int) -> Any:
        nonlocal inflaters
        inflaters += 1
        return real(*args)

    with pytest.MonkeyPatch.context() as patch:  # a counter around the real zlib, not a mock
        patch.setattr(zlib, "decompressobj", counting)
        with pytest.raises(ValueError):
            gunzip(body, 4 * 1024 * 1024)
    assert inflaters == MAX_GZIP_MEMBERS
    assert gunzip(empty_member * MAX_GZIP_MEMBERS + b"\0" * 100, 10) == b""  # up to the bound: fine
    served = make_served()
    status, _, answer = post(served, body, headers={"Content-Encoding": "gzip"})
    assert status == 400
    assert f"more than {MAX_GZIP_MEMBERS} members" in status_of(answer).message
    assert served.receiver.stats().requests == {"bad_request": 1}
