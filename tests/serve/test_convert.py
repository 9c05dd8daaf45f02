"""OTLP protobuf -> ``ReadableSpan``: what the SDK encodes comes back as the same span (ids, parent and its
remoteness, kind, status, times, attributes, events, links, resource, scope); values the SDK cannot hold
become JSON strings; a malformed span is rejected alone."""

from __future__ import annotations

import base64
import json

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, TraceFlags, set_span_in_context
from opentelemetry.trace.status import Status, StatusCode

from ctxutil_otel.serve._convert import attributes_from, convert_request


def _record() -> list[ReadableSpan]:
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "svc", "deployment.environment": "t"})
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("scope-a", "1.2.3", schema_url="https://opentelemetry.io/schemas/1.26.0")
    remote_parent = SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=TraceFlags(1))
    linked = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    with (
        tracer.start_as_current_span(
            "local-root", context=set_span_in_context(NonRecordingSpan(remote_parent)), kind=SpanKind.SERVER
        ),
        tracer.start_as_current_span(
            "child",
            kind=SpanKind.CLIENT,
            attributes={"s": "x", "b": True, "i": 7, "f": 0.5, "strs": ("a", "b"), "ints": [1, 2]},
            links=[Link(linked, {"why": "batch"})],
        ) as child,
    ):
        child.add_event("retry", {"attempt": 2}, timestamp=123)
        child.set_status(Status(StatusCode.ERROR, "boom"))
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_round_trip_of_sdk_encoded_spans() -> None:
    originals = {s.name: s for s in _record()}
    conversion = convert_request(encode_spans(list(originals.values())))
    assert conversion.rejected == 0
    converted = {s.name: s for s in conversion.spans}
    assert set(converted) == set(originals)
    for name, original in originals.items():
        span = converted[name]
        assert span.context is not None and original.context is not None
        assert (span.context.trace_id, span.context.span_id) == (
            original.context.trace_id,
            original.context.span_id,
        )
        assert span.context.is_remote  # produced in another process
        assert span.context.trace_flags.sampled  # exported, hence recorded (module docstring)
        assert span.kind == original.kind
        assert (span.start_time, span.end_time) == (original.start_time, original.end_time)
        assert dict(span.attributes or {}) == dict(original.attributes or {})
        assert dict(span.resource.attributes) == dict(original.resource.attributes)
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "scope-a"
        assert span.instrumentation_scope.version == "1.2.3"
        assert span.instrumentation_scope.schema_url == "https://opentelemetry.io/schemas/1.26.0"
        assert span.parent is not None and original.parent is not None
        assert span.parent.span_id == original.parent.span_id
        # The OTLP flags carry the parent's remoteness: the local root's parent is remote, the child's is not.
        assert span.parent.is_remote == original.parent.is_remote
    child = converted["child"]
    assert child.status.status_code is StatusCode.ERROR and child.status.description == "boom"
    assert [(e.name, dict(e.attributes or {}), e.timestamp) for e in child.events] == [
        ("retry", {"attempt": 2}, 123)
    ]
    (link,) = child.links
    assert (link.context.trace_id, link.context.span_id, dict(link.attributes or {})) == (
        0x1234,
        0x5678,
        {"why": "batch"},
    )
    assert converted["local-root"].parent is not None and converted["local-root"].parent.is_remote


def _value(**kwargs: object) -> AnyValue:
    return AnyValue(**kwargs)  # type: ignore[arg-type]


def test_any_value_decoding() -> None:
    array = AnyValue()
    array.array_value.values.extend([_value(int_value=1), _value(string_value="two")])
    nested = AnyValue()
    nested.kvlist_value.values.extend(
        [
            KeyValue(key="k", value=_value(bool_value=True)),
            KeyValue(key="raw", value=_value(bytes_value=b"\x00\x01")),
        ]
    )
    floats = AnyValue()
    floats.array_value.values.extend([_value(double_value=0.5), _value(double_value=1.5)])
    empty_array = AnyValue()
    empty_array.array_value.SetInParent()
    pairs = [
        KeyValue(key="s", value=_value(string_value="text")),
        KeyValue(key="unset", value=AnyValue()),
        KeyValue(key="bytes", value=_value(bytes_value=b"\xffdata")),
        KeyValue(key="mixed", value=array),
        KeyValue(key="kv", value=nested),
        KeyValue(key="floats", value=floats),
        KeyValue(key="empty", value=empty_array),
        KeyValue(key="dup", value=_value(int_value=1)),
        KeyValue(key="dup", value=_value(int_value=2)),
    ]
    decoded = attributes_from(pairs)
    assert "unset" not in decoded
    assert decoded["s"] == "text"
    assert base64.b64decode(str(decoded["bytes"])) == b"\xffdata"
    assert json.loads(str(decoded["mixed"])) == [1, "two"]
    assert json.loads(str(decoded["kv"])) == {"k": True, "raw": base64.b64encode(b"\x00\x01").decode()}
    assert decoded["floats"] == (0.5, 1.5)
    assert decoded["empty"] == ()
    assert decoded["dup"] == 2


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("trace_id", b"\x01" * 4, "trace_id must be 16 bytes, got 4"),
        ("trace_id", b"\x00" * 16, "trace_id must not be all zeros"),
        ("span_id", b"\x01" * 9, "span_id must be 8 bytes, got 9"),
        ("parent_span_id", b"\x01" * 3, "parent_span_id must be 8 bytes, got 3"),
    ],
)
def test_malformed_span_is_rejected_alone(field: str, value: bytes, reason: str) -> None:
    request = encode_spans(_record())
    spans = request.resource_spans[0].scope_spans[0].spans
    setattr(spans[0], field, value)
    conversion = convert_request(request)
    assert conversion.rejected == 1
    assert len(conversion.spans) == len(spans) - 1
    assert conversion.errors == [f"span 0: {reason}"]
    assert reason in conversion.error_message()


def test_parent_without_remote_flags_is_local_and_zero_parent_is_root() -> None:
    request = encode_spans(_record())
    spans = request.resource_spans[0].scope_spans[0].spans
    for span in spans:
        span.flags = 0  # an older sender: no "has is_remote" bit
    spans[0].parent_span_id = b"\x00" * 8
    converted = convert_request(request).spans
    assert converted[0].parent is None
    assert converted[1].parent is not None and not converted[1].parent.is_remote


def test_empty_request_converts_to_nothing() -> None:
    conversion = convert_request(ExportTraceServiceRequest())
    assert (conversion.spans, conversion.rejected, conversion.error_message()) == ([], 0, "")
