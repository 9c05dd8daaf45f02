"""Fuzz target for the OTLP/HTTP path (issue 10): generated request heads and bodies (protobuf built from
generated spans, OTLP/JSON, gzip, garbage, odd framing) against the real HTTP listener. Whatever arrives,
the server answers or closes, never crashes or answers 500, stays alive, and its accounting stays exact:
every answered request counted in exactly one outcome, every accepted span fed to the processor.

A brief run in the default suite (``max_examples`` small); a longer one on demand:
``CTXUTIL_FUZZ_EXAMPLES=5000 .venv/bin/python -m pytest tests/serve/test_fuzz_http.py``. A crash found
becomes a regression test below (``test_regression_*``).
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import socket
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from .conftest import RagTrace, Served, connect
from .test_errors import assert_alive

EXAMPLES = int(os.environ.get("CTXUTIL_FUZZ_EXAMPLES", "40"))

_keys = st.one_of(
    st.sampled_from(
        [
            "openinference.span.kind",
            "input.value",
            "output.value",
            "retrieval.documents.0.document.content",
            "llm.output_messages.0.message.content",
            "gen_ai.operation.name",
            "llm.output_messages.².x",
        ]
    ),
    st.text(max_size=40),
)
_values = st.one_of(
    st.text(max_size=60).map(lambda v: AnyValue(string_value=v)),
    st.integers(-(2**63), 2**63 - 1).map(lambda v: AnyValue(int_value=v)),
    st.sampled_from(["CHAIN", "RETRIEVER", "LLM"]).map(lambda v: AnyValue(string_value=v)),
)
_spans = st.builds(
    lambda trace_id, span_id, parent, name, kind, attrs: Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        kind=kind,
        start_time_unix_nano=1,
        end_time_unix_nano=2,
        attributes=[KeyValue(key=k, value=v) for k, v in attrs],
    ),
    st.one_of(st.binary(min_size=16, max_size=16), st.binary(max_size=20)),
    st.one_of(st.binary(min_size=8, max_size=8), st.binary(max_size=10)),
    st.one_of(st.just(b""), st.binary(min_size=8, max_size=8)),
    st.text(max_size=30),
    st.integers(0, 10),
    st.lists(st.tuples(_keys, _values), max_size=6),
)
_requests = st.lists(_spans, max_size=5).map(
    lambda spans: ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=spans)])]
    ).SerializeToString()
)


def _json_of(body: bytes) -> bytes:
    from google.protobuf import json_format

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return json.dumps(json_format.MessageToDict(request, use_integers_for_enums=True)).encode()


@st.composite
def _http_requests(draw: st.DrawFn) -> bytes:
    body = draw(st.one_of(_requests, st.binary(max_size=300)))
    content_type = draw(
        st.sampled_from(
            ["application/x-protobuf", "application/json", "text/plain", "application/x-protobuf; x=1"]
        )
    )
    if content_type == "application/json" and draw(st.booleans()):
        with contextlib.suppress(Exception):  # garbage bytes: sent as they are
            body = _json_of(body)
    headers = [f"Content-Type: {content_type}"]
    if draw(st.booleans()):
        body = gzip.compress(body) if draw(st.booleans()) else body
        headers.append(f"Content-Encoding: {draw(st.sampled_from(['gzip', 'br', 'identity', 'GZIP']))}")
    framing = draw(st.sampled_from(["exact", "short", "none", "two", "chunked", "bad"]))
    if framing == "exact":
        headers.append(f"Content-Length: {len(body)}")
    elif framing == "short":
        headers.append(f"Content-Length: {max(0, len(body) - 1)}")
    elif framing == "two":
        headers += [f"Content-Length: {len(body)}", f"Content-Length: {len(body) + 1}"]
    elif framing == "chunked":
        headers += ["Transfer-Encoding: chunked", f"Content-Length: {len(body)}"]
    elif framing == "bad":
        headers.append(f"Content-Length: {draw(st.sampled_from(['-1', '+5', '5_0', 'x', '99999999999999']))}")
    method = draw(st.sampled_from(["POST", "POST", "GET", "PUT", "POST"]))
    path = draw(st.sampled_from(["/v1/traces", "/v1/traces?x=1", "/v1/logs", "/healthz", "/" + "a" * 300]))
    extra = draw(
        st.lists(st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=20), max_size=3)
    )
    headers += [f"X-{i}: {value}" for i, value in enumerate(extra)]
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + "\r\n".join(headers) + "\r\n\r\n"
    return head.encode() + body


def _exchange(served: Served, request: bytes) -> bytes:
    with connect(served) as sock:
        try:
            sock.sendall(request)
            sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered and closed before reading it all
            pass
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    return answer


_SERVED: dict[int, Served] = {}


def _served(make_served: Callable[..., Served]) -> Served:
    """One receiver for all the examples of a run (hypothesis calls the test many times with the same
    function-scoped fixture): the accounting must stay exact across all of them."""
    key = id(make_served)
    if key not in _SERVED:
        _SERVED.clear()
        _SERVED[key] = make_served(max_request_bytes=64 * 1024, header_timeout_s=5.0, request_timeout_s=5.0)
    return _SERVED[key]


def _is_probe(request_bytes: bytes) -> bool:
    return request_bytes.startswith((b"GET /healthz ", b"GET /healthz?"))


def check_request(served: Served, request_bytes: bytes) -> None:
    """Send one request; the invariants after it."""
    before = served.receiver.stats()
    answer = _exchange(served, request_bytes)
    if answer:
        status_line = answer.split(b"\r\n", 1)[0]
        assert status_line.startswith(b"HTTP/1.1 "), status_line
        assert not status_line.startswith(b"HTTP/1.1 500"), status_line  # a bug answers 500
    after = served.receiver.stats()
    counted = sum(after.requests.values()) - sum(before.requests.values())
    assert counted == (0 if _is_probe(request_bytes) else 1), (request_bytes[:200], answer[:200])
    assert "internal" not in after.requests
    stats = served.evaluator.stats()  # a consistent snapshot: every captured turn somewhere
    outcomes = stats.sampled_out + sum(stats.dropped.values()) + stats.evaluated + stats.not_applicable
    outcomes += sum(stats.failed.values()) + stats.queue_size + stats.in_flight
    assert stats.captured == outcomes


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 40,  # the suite's brief run is the same every time
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request_bytes=_http_requests())
def test_http_listener_survives_any_request(make_served: Callable[..., Served], request_bytes: bytes) -> None:
    check_request(_served(make_served), request_bytes)


def test_hostile_requests_kept_as_regressions(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served(max_request_bytes=64 * 1024)
    for request_bytes in _REGRESSIONS:
        check_request(served, request_bytes)
    assert_alive(served, rag_trace)


def _post(body: bytes, content_type: str = "application/x-protobuf", encoding: str = "") -> bytes:
    coding = f"Content-Encoding: {encoding}\r\n" if encoding else ""
    return (
        f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: {content_type}\r\n"
        f"{coding}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


#: Hostile requests kept as regressions: issue 10's (many gzip members; odd attribute keys) and OTLP/JSON
#: shapes that reach recursion limits. (400 fuzzer examples found no crash so far: none to add yet.)
_REGRESSIONS: list[bytes] = [
    _post(gzip.compress(b"", mtime=0) * 3000, encoding="gzip"),
    _post(b"[" * 50_000 + b"]" * 50_000, "application/json"),
    _post(
        json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "0" * 31}]}]}]}).encode(),
        "application/json",
    ),
    _post(
        ExportTraceServiceRequest(
            resource_spans=[
                ResourceSpans(
                    scope_spans=[
                        ScopeSpans(
                            spans=[
                                Span(
                                    trace_id=b"\1" * 16,
                                    span_id=b"\2" * 8,
                                    attributes=[
                                        KeyValue(
                                            key="openinference.span.kind", value=AnyValue(string_value="LLM")
                                        ),
                                        KeyValue(
                                            key="llm.output_messages.².x", value=AnyValue(string_value="a")
                                        ),
                                        KeyValue(
                                            key="llm.output_messages." + "9" * 5000 + ".message.content",
                                            value=AnyValue(string_value="a"),
                                        ),
                                    ],
                                )
                            ]
                        )
                    ]
                )
            ]
        ).SerializeToString()
    ),
]
