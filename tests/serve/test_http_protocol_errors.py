"""Requests the standard library's HTTP parser refuses by itself (unsupported method or HTTP version,
malformed request line, request line or headers over its limits) are answered like the listener's own
errors, as the OTLP specification requires for every 4xx/5xx ("OTLP/HTTP Response", "Failures"): a
protobuf ``google.rpc.Status`` body, ``Content-Type: application/x-protobuf``, the connection closed; each
is counted in ``ReceiverStats.requests``, no answer quotes the request, and the listener keeps serving.

Raw sockets (real server on 127.0.0.1): ``http.client`` cannot send most of these requests. Synchronisation
without sleeps: the server closes the connection after it has counted and answered."""

from __future__ import annotations

import http.client
from collections.abc import Callable

from google.rpc import code_pb2, status_pb2

from ctxutil_otel.serve._status import parser_error

from .conftest import RagTrace, Served, connect, read_until_closed
from .test_errors import assert_alive, status_of

# Put where a request could carry content (the method, the path, the version, a header): never echoed.
SECRET = "s3cr3t-query-text"


def exchange(served: Served, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` on a fresh connection, read the answer until the server closes; returns the
    status, the headers (lower-case names) and the body, checked against its ``Content-Length`` (but for
    HEAD, whose answer has none)."""
    with connect(served) as sock:
        sock.sendall(request)
        answer = read_until_closed(sock)
    assert SECRET.encode() not in answer
    head, separator, body = answer.partition(b"\r\n\r\n")
    assert separator, answer[:200]
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, status, _ = status_line.split(" ", 2)
    assert version == "HTTP/1.1"
    headers = {name.strip().lower(): value.strip() for name, _, value in (ln.partition(":") for ln in lines)}
    if not request.startswith(b"HEAD "):
        assert int(headers["content-length"]) == len(body)
    assert headers["connection"] == "close"
    return int(status), headers, body


def rpc_status(headers: dict[str, str], body: bytes) -> status_pb2.Status:
    assert headers["content-type"] == "application/x-protobuf"
    return status_of(body)


def test_unsupported_method_is_a_counted_unimplemented_status(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    try:  # the ordinary client: PUT with a body, answered before it is read
        connection.request(
            "PUT",
            "/v1/traces",
            body=rag_trace.request_bytes(),
            headers={"Content-Type": "application/x-protobuf"},
        )
        response = connection.getresponse()
        headers = {k.lower(): v for k, v in response.getheaders()}
        status = rpc_status(headers, response.read())
    finally:
        connection.close()
    assert response.status == 501
    assert headers["connection"] == "close"
    assert status.code == code_pb2.UNIMPLEMENTED
    assert "POST" in status.message
    # A method name of the sender's choosing is not echoed.
    code, headers, body = exchange(served, f"{SECRET} /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert code == 501
    assert rpc_status(headers, body).code == code_pb2.UNIMPLEMENTED
    # HEAD: the same head, no body (a body would be read as the next answer).
    code, headers, body = exchange(served, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (code, headers["content-type"], body) == (501, "application/x-protobuf", b"")
    assert int(headers["content-length"]) > 0
    assert served.receiver.stats().requests["not_implemented"] == 3
    assert_alive(served, rag_trace)


def test_malformed_request_line_is_a_counted_invalid_argument(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    for request_line in (
        SECRET,  # one word
        f"POST /v1/traces HTTP/1.1 {SECRET}",  # four words: the last is taken for a (bad) version
        f"POST /v1/traces HTTP/1.{SECRET}",  # not a version number
        f"POST /{SECRET}",  # HTTP/0.9 knows GET only
    ):
        code, headers, body = exchange(served, f"{request_line}\r\nHost: x\r\n\r\n".encode())
        assert code == 400, request_line
        status = rpc_status(headers, body)
        assert status.code == code_pb2.INVALID_ARGUMENT
        assert "malformed HTTP request line" in status.message
    assert served.receiver.stats().requests["bad_request"] == 4
    assert_alive(served, rag_trace)


def test_http2_on_the_http_port_names_the_grpc_port(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    # An OTLP/gRPC exporter pointed at the OTLP/HTTP port: the HTTP/2 connection preface.
    code, headers, body = exchange(served, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
    assert code == 505
    status = rpc_status(headers, body)
    assert status.code == code_pb2.UNIMPLEMENTED
    assert "gRPC" in status.message
    assert served.receiver.stats().requests["not_implemented"] == 1
    assert_alive(served, rag_trace)


def test_request_line_and_headers_over_the_parser_limits_are_counted_too_large(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    limit = 65536  # http.server reads the request line, http.client each header line, up to this
    head = "POST /v1/traces HTTP/1.1\r\nHost: x\r\n"
    requests = {
        414: f"POST /v1/traces?q={SECRET}{'a' * limit} HTTP/1.1\r\n\r\n",
        431: head + f"X-Long: {SECRET}{'a' * limit}\r\n\r\n",
    }
    many = head + "".join(f"X-{i}: {SECRET}\r\n" for i in range(101)) + "\r\n"  # http.client: at most 100
    for expected, request in (*requests.items(), (431, many)):
        code, headers, body = exchange(served, request.encode())
        assert code == expected
        status = rpc_status(headers, body)
        assert status.code == code_pb2.RESOURCE_EXHAUSTED
        assert "too large" in status.message or "too long" in status.message
    assert served.receiver.stats().requests["too_large"] == 3
    assert_alive(served, rag_trace)


def test_other_parser_errors_map_by_status_class() -> None:
    # Statuses the parser does not send today (a future Python may): 4xx bad request, 5xx internal.
    assert parser_error(418) == (code_pb2.INVALID_ARGUMENT, "I'm a Teapot", "bad_request")
    assert parser_error(502) == (code_pb2.INTERNAL, "Bad Gateway", "internal")
