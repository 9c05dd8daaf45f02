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

from ctxutil_otel.serve._parsing import MAX_HEADER_BYTES
from ctxutil_otel.serve._status import parser_error

from .conftest import EXPORT_HEADERS, RagTrace, Served, connect, read_until_closed
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


# --- framing: Content-Length, Transfer-Encoding (RFC 9112 section 6) ---------------------------------
def responses(answer: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Split ``answer`` (everything the server sent on one connection) into its responses, each framed by
    its ``Content-Length``."""
    parsed = []
    while answer:
        head, separator, rest = answer.partition(b"\r\n\r\n")
        assert separator, answer[:200]
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {n.strip().lower(): v.strip() for n, _, v in (ln.partition(":") for ln in lines)}
        length = int(headers["content-length"])
        parsed.append((int(status_line.split(" ", 2)[1]), headers, rest[:length]))
        answer = rest[length:]
    return parsed


def send(served: Served, request: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Send ``request`` (its last request says ``Connection: close``) on a fresh connection; the answers."""
    with connect(served) as sock:
        sock.sendall(request)
        return responses(read_until_closed(sock))


def export_head(*lengths: str, extra: str = "") -> bytes:
    fields = "".join(f"Content-Length: {value}\r\n" for value in lengths)
    return (
        "POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        f"{fields}{extra}Connection: close\r\n\r\n"
    ).encode()


def test_conflicting_or_malformed_content_length_is_a_counted_bad_request(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    payload = rag_trace.request_bytes()
    n = str(len(payload))
    refused = (
        (("0", n), ""),  # RFC 9112 section 6.3: differing values are an unrecoverable framing error
        ((n, "0"), ""),
        ((f"0, {n}",), ""),  # the same, as one list-valued field (RFC 9110 section 5.3)
        ((n,), "Transfer-Encoding: chunked\r\n"),  # both: ambiguous framing (RFC 9112 section 6.3)
        ((n,), "Transfer-Encoding: identity\r\n"),
        (("+0",), ""),  # Content-Length = 1*DIGIT: no sign, no digit separators, no empty value
        (("0_0",), ""),
        (("",), ""),
        ((f"{n},",), ""),
    )
    for lengths, extra in refused:
        [(code, headers, body)] = send(served, export_head(*lengths, extra=extra) + payload)
        assert code == 400, (lengths, extra)
        assert headers["connection"] == "close"
        status = rpc_status(headers, body)
        assert status.code == code_pb2.INVALID_ARGUMENT
        assert "Content-Length" in status.message
    assert served.receiver.stats().requests["bad_request"] == len(refused)
    assert served.receiver.stats().spans_accepted == 0
    # Identical values, repeated or listed, mean one length (RFC 9110 section 8.6 allows either).
    for lengths in ((n, n), (f"{n}, {n}",), (f" {n} ",)):
        [(code, _, body)] = send(served, export_head(*lengths) + payload)
        assert (code, body) == (200, b"")
    assert served.receiver.stats().requests["ok"] == 3
    assert served.receiver.stats().spans_accepted == 3 * len(rag_trace.spans)
    assert_alive(served, rag_trace)


def test_a_get_with_a_body_is_answered_then_the_connection_closed(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    # The "body" is a second request: read as one, it would be answered, here it is not (a proxy that
    # forwards a GET with a body would otherwise have it smuggle requests past its own checks).
    smuggled = b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n"
    for framing in (f"Content-Length: {len(smuggled)}", "Transfer-Encoding: chunked"):
        head = f"GET /healthz HTTP/1.1\r\nHost: x\r\n{framing}\r\n\r\n".encode()
        [(code, headers, body)] = send(served, head + smuggled)
        assert (code, body, headers["connection"]) == (200, b"ok\n", "close")
    # Without a body the connection is kept: two requests on one connection, both answered.
    plain = b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
    answers = send(served, plain + plain.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
    assert [(code, body) for code, _, body in answers] == [(200, b"ok\n")] * 2
    assert "not_found" not in served.receiver.stats().requests
    assert_alive(served, rag_trace)


# --- the request line and the header section ---------------------------------------------------------
def test_an_empty_line_before_the_request_line_is_ignored(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    payload = rag_trace.request_bytes()
    # RFC 9112 section 2.2: a server SHOULD ignore at least one empty line before the request line (some
    # clients send a CRLF after a POST body).
    export = (EXPORT_HEADERS.format(length=len(payload))).encode() + payload
    health = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answers = send(served, b"\r\n" + export + b"\r\n" + health)
    assert [(code, body) for code, _, body in answers] == [(200, b""), (200, b"ok\n")]
    [(code, _, body)] = send(served, b"\n" + health)  # a bare LF ends a line too (section 2.2)
    assert (code, body) == (200, b"ok\n")
    assert served.receiver.stats().requests["ok"] == 1
    assert served.receiver.stats().spans_accepted == len(rag_trace.spans)
    # Only empty (or blank) lines: a request line that is not there is a malformed one, answered.
    for request in (b"\r\n\r\n", b"\r\n \t \r\n\r\n", b" \r\n"):
        code, headers, body = exchange(served, request)
        assert code == 400, request
        assert "malformed HTTP request line" in rpc_status(headers, body).message
    assert served.receiver.stats().requests["bad_request"] == 3
    assert_alive(served, rag_trace)


def test_header_section_over_its_total_limit_is_refused_before_it_ends(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    head = b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
    line = b"X-Pad-%03d: " + SECRET.encode() + b"a" * 8000 + b"\r\n"  # each far below the per-line limit
    lines = b"".join(line % i for i in range(MAX_HEADER_BYTES // len(line) + 1))
    assert MAX_HEADER_BYTES < len(lines) < MAX_HEADER_BYTES + 8192
    # The header section does not end here: refused on the bytes read so far, not after reading it all.
    code, headers, body = exchange(served, head + lines)
    assert code == 431
    status = rpc_status(headers, body)
    assert status.code == code_pb2.RESOURCE_EXHAUSTED
    assert f"at most {MAX_HEADER_BYTES} bytes" in status.message
    # Complete, and within the limit of 100 lines: still too large in all.
    code, headers, body = exchange(served, head + lines + b"\r\n")
    assert code == 431
    assert served.receiver.stats().requests["too_large"] == 2
    # Just under the limit (with the request's own fields and the final empty line): served.
    payload = rag_trace.request_bytes()
    fields = export_head(str(len(payload))).decode().split("\r\n", 1)[1][: -len("\r\n")]
    room = MAX_HEADER_BYTES - len(fields) - len("X-Pad: \r\n") - len("\r\n")
    request = f"POST /v1/traces HTTP/1.1\r\n{fields}X-Pad: {'a' * room}\r\n\r\n".encode() + payload
    [(code, _, body)] = send(served, request)
    assert (code, body) == (200, b"")
    assert served.receiver.stats().spans_accepted == len(rag_trace.spans)
    assert_alive(served, rag_trace)


def test_a_header_line_that_is_no_field_is_a_counted_bad_request(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()
    # http.client's parser stops at such a line and takes the rest for the body, dropping the fields
    # after it: here Transfer-Encoding, which a lenient proxy would apply (RFC 9112 section 5.1: whitespace
    # before the colon MUST be refused with 400).
    for line in ("Transfer-Encoding : chunked", f"X-{SECRET}", f" folded {SECRET}"):
        head = f"POST /v1/traces HTTP/1.1\r\n{line}\r\nContent-Type: application/x-protobuf\r\n"
        code, headers, body = exchange(served, f"{head}Content-Length: 0\r\n\r\n".encode())
        assert code == 400, line
        status = rpc_status(headers, body)
        assert (status.code, status.message) == (
            code_pb2.INVALID_ARGUMENT,
            "malformed header field line (RFC 9112 section 5)",
        )
    assert served.receiver.stats().requests == {"bad_request": 3}
    assert_alive(served, rag_trace)
