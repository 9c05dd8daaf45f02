"""OTLP protobuf ``ResourceSpans`` -> ``opentelemetry.sdk.trace.ReadableSpan`` (what the span processor
reads).

Each ``opentelemetry.proto.trace.v1.Span`` becomes a real ``ReadableSpan``:

* ``context``: ``SpanContext(trace_id, span_id, is_remote=True)``: the span was produced in another
  process. Its trace flags are the low 8 bits of the OTLP ``flags`` field (W3C trace flags) with the
  *sampled* bit always set: a span that was exported was recorded, and the OpenTelemetry SDK's OTLP
  encoder leaves those bits at 0 (``opentelemetry-exporter-otlp-proto-common``, ``_span_flags``), so
  without it a ``ParentBased`` sampler would drop the evaluation span parented to it. ``trace_state`` is
  parsed with ``TraceState.from_header`` (a malformed one becomes empty).
* ``parent``: ``None`` when ``parent_span_id`` is empty (or all zeros); otherwise a ``SpanContext`` whose
  ``is_remote`` comes from the OTLP span flags (``SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK`` 0x100 and
  ``SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK`` 0x200, ``opentelemetry/proto/trace/v1/trace.proto``). A sender
  that does not set the *has is_remote* bit gets ``is_remote=False`` (a local parent): the trace is then
  assembled at its true root, which a Collector's ``loadbalancing`` exporter (routing key ``traceID``)
  delivers to the same replica.
* ``name``, ``kind`` (OTLP ``SPAN_KIND_INTERNAL`` 1 .. ``CONSUMER`` 5 -> ``SpanKind`` 0 .. 4; unspecified
  or unknown -> ``INTERNAL``), ``start_time`` / ``end_time`` (nanoseconds since the epoch; 0 -> ``None``),
  ``status`` (code and, for errors, the message), ``events``, ``links``, ``resource`` (one ``Resource``
  per ``ResourceSpans``, with its ``schema_url``) and ``instrumentation_scope`` (name, version,
  schema URL, attributes).
* ``attributes``, decoded from ``AnyValue``: string, bool, int and double as they are; an array of one
  scalar type as a tuple (the SDK's homogeneous sequences); an empty array as ``()``; anything the SDK
  cannot hold (mixed or nested arrays, ``kvlist_value``) as a compact JSON string (bytes inside it as
  base64); ``bytes_value`` as a base64 string (the OTLP/JSON rendering of bytes); an unset value is left
  out. Duplicate keys: the last one wins.

Tolerance: a span whose ``trace_id`` is not 16 bytes, whose ``span_id`` or ``parent_span_id`` is not 8
bytes, or whose ids are all zeros is rejected on its own (counted in :attr:`Conversion.rejected`, with the
reason in :attr:`Conversion.errors`); the other spans of the request are kept. The OTLP receiver reports
them as a partial success (``rejected_spans``). Attribute values never reject a span.
"""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.common.v1.common_pb2 import InstrumentationScope as PbScope
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans
from opentelemetry.proto.trace.v1.trace_pb2 import Span as PbSpan
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, TraceFlags, TraceState
from opentelemetry.trace.status import Status, StatusCode
from opentelemetry.util.types import AttributeValue

__all__ = [
    "MAX_ERRORS",
    "Conversion",
    "InvalidSpanError",
    "attributes_from",
    "convert_request",
    "convert_span",
]

#: ``Span.flags`` bits (``opentelemetry.proto.trace.v1.SpanFlags``).
HAS_IS_REMOTE: Final = 0x100
IS_REMOTE: Final = 0x200
#: Distinct error messages kept per request (the count of rejected spans is exact).
MAX_ERRORS: Final = 5

_SCALARS: Final = frozenset({"string_value", "bool_value", "int_value", "double_value"})
# OTLP SpanKind (0 unspecified, 1 internal .. 5 consumer) -> the API's SpanKind (0 internal .. 4 consumer).
_KINDS: Final = {
    1: SpanKind.INTERNAL,
    2: SpanKind.SERVER,
    3: SpanKind.CLIENT,
    4: SpanKind.PRODUCER,
    5: SpanKind.CONSUMER,
}
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_UNSET: Final = Status(StatusCode.UNSET)
_OK: Final = Status(StatusCode.OK)
_EMPTY_STATE: Final = TraceState()


class InvalidSpanError(ValueError):
    """One OTLP span cannot be represented (bad id length, all-zero id); the message names the field."""


@dataclass
class Conversion:
    """The spans of one ``ExportTraceServiceRequest``.

    Attributes:
        spans: The converted spans, in request order.
        rejected: Spans that could not be converted (see the module docstring).
        errors: Up to :data:`MAX_ERRORS` reasons, e.g. ``"span 3: trace_id must be 16 bytes, got 4"``.
    """

    spans: list[ReadableSpan] = field(default_factory=list)
    rejected: int = 0
    errors: list[str] = field(default_factory=list)

    def error_message(self) -> str:
        """An English message for the OTLP partial-success ``error_message`` ("" when none was rejected)."""
        if not self.rejected:
            return ""
        more = "" if len(self.errors) >= self.rejected else f" (first {len(self.errors)} reasons shown)"
        return f"rejected {self.rejected} span(s){more}: " + "; ".join(self.errors)


def _plain(value: AnyValue) -> Any:
    """An ``AnyValue`` as plain JSON-able Python (for the values the SDK cannot hold)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_plain(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _plain(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return getattr(value, kind)


def _json(value: AnyValue) -> str:
    return json.dumps(_plain(value), ensure_ascii=False, separators=(",", ":"))


def _decode(value: AnyValue, kind: str) -> AttributeValue:
    if kind in _SCALARS:
        decoded: AttributeValue = getattr(value, kind)
        return decoded
    if kind == "array_value":
        items = value.array_value.values
        if not items:
            return ()
        kinds = {item.WhichOneof("value") for item in items}
        if len(kinds) == 1:
            (item_kind,) = kinds
            if item_kind in _SCALARS:
                return tuple(getattr(item, item_kind) for item in items)
        return _json(value)
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return _json(value)  # kvlist_value


def attributes_from(pairs: Iterable[KeyValue]) -> dict[str, AttributeValue]:
    """OTLP ``KeyValue`` attributes -> a plain ``dict`` of SDK attribute values (rules in the module
    docstring). Never raises on values."""
    out: dict[str, AttributeValue] = {}
    for kv in pairs:
        value = kv.value
        kind = value.WhichOneof("value")
        if kind == "string_value":  # by far the most common: no further dispatch
            out[kv.key] = value.string_value
        elif kind is not None:
            out[kv.key] = _decode(value, kind)
    return out


@functools.lru_cache(maxsize=256)
def _trace_state(header: str) -> TraceState:
    return TraceState.from_header([header])


def _flags(flags: int) -> TraceFlags:
    low = flags & 0xFF
    return _SAMPLED if low <= 1 else TraceFlags(low | TraceFlags.SAMPLED)


def _id(raw: bytes, size: int, name: str) -> int:
    if len(raw) != size:
        raise InvalidSpanError(f"{name} must be {size} bytes, got {len(raw)}")
    value = int.from_bytes(raw, "big")
    if value == 0:
        raise InvalidSpanError(f"{name} must not be all zeros")
    return value


def _status(span: PbSpan) -> Status:
    code = span.status.code
    if code == 2:
        return Status(StatusCode.ERROR, span.status.message or None)
    return _OK if code == 1 else _UNSET


def convert_span(span: PbSpan, resource: Resource, scope: InstrumentationScope | None) -> ReadableSpan:
    """One OTLP span -> ``ReadableSpan`` (rules in the module docstring).

    Raises:
        InvalidSpanError: for a ``trace_id`` other than 16 bytes, a ``span_id``/``parent_span_id`` other
            than 8 bytes, or an all-zero trace or span id.
    """
    trace_id = _id(span.trace_id, 16, "trace_id")
    span_id = _id(span.span_id, 8, "span_id")
    flags = span.flags
    trace_flags = _flags(flags)
    state = _trace_state(span.trace_state) if span.trace_state else _EMPTY_STATE
    context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=trace_flags, trace_state=state)
    parent: SpanContext | None = None
    raw_parent = span.parent_span_id
    if raw_parent and raw_parent.strip(b"\0"):
        parent_id = _id(raw_parent, 8, "parent_span_id")
        parent_remote = bool(flags & IS_REMOTE) if flags & HAS_IS_REMOTE else False
        parent = SpanContext(trace_id, parent_id, is_remote=parent_remote, trace_flags=trace_flags)
    events = [
        Event(event.name, attributes_from(event.attributes), event.time_unix_nano or None)
        for event in span.events
    ]
    links = [_link(link, i) for i, link in enumerate(span.links)]
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=resource,
        attributes=attributes_from(span.attributes),
        events=events,
        links=[link for link in links if link is not None],
        kind=_KINDS.get(span.kind, SpanKind.INTERNAL),
        status=_status(span),
        start_time=span.start_time_unix_nano or None,
        end_time=span.end_time_unix_nano or None,
        instrumentation_scope=scope,
    )


def _link(link: PbSpan.Link, index: int) -> Link | None:
    """A link with valid ids, else ``None`` (a bad link never rejects its span)."""
    try:
        trace_id = _id(link.trace_id, 16, f"links[{index}].trace_id")
        span_id = _id(link.span_id, 8, f"links[{index}].span_id")
    except InvalidSpanError:
        return None
    remote = bool(link.flags & IS_REMOTE) if link.flags & HAS_IS_REMOTE else True
    state = _trace_state(link.trace_state) if link.trace_state else _EMPTY_STATE
    context = SpanContext(
        trace_id, span_id, is_remote=remote, trace_flags=_flags(link.flags), trace_state=state
    )
    return Link(context, attributes_from(link.attributes))


def _scope(scope: PbScope, schema_url: str) -> InstrumentationScope | None:
    if not scope.name and not scope.version and not scope.attributes and not schema_url:
        return None
    return InstrumentationScope(
        scope.name,
        scope.version or None,
        schema_url or None,
        attributes_from(scope.attributes) or None,
    )


def _resource(resource_spans: ResourceSpans) -> Resource:
    return Resource(attributes_from(resource_spans.resource.attributes), resource_spans.schema_url or None)


def convert_request(request: ExportTraceServiceRequest) -> Conversion:
    """Every span of an ``ExportTraceServiceRequest`` as a ``ReadableSpan``; a span that cannot be
    converted is counted in ``rejected`` (never raises for span content)."""
    out = Conversion()
    index = 0
    for resource_spans in request.resource_spans:
        resource = _resource(resource_spans)
        for scope_spans in resource_spans.scope_spans:
            scope = _scope(scope_spans.scope, scope_spans.schema_url)
            for span in scope_spans.spans:
                try:
                    out.spans.append(convert_span(span, resource, scope))
                except InvalidSpanError as exc:
                    out.rejected += 1
                    if len(out.errors) < MAX_ERRORS:
                        out.errors.append(f"span {index}: {exc}")
                index += 1
    return out
