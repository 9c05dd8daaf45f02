"""OTLP/JSON (``Content-Type: application/json``) for the OTLP/HTTP listener, on protobuf's own
``json_format`` (the Protobuf JSON mapping) plus the OTLP fix-ups the specification asks for
(``specification/protocol/otlp.md``, "JSON Protobuf Encoding"):

* ``traceId``, ``spanId`` and ``parentSpanId`` (spans and links) are hex strings, not the base64 of the
  standard mapping: turned into base64 before ``json_format`` parses them;
* enum values are integers (``json_format`` takes integers or names); keys are lowerCamelCase (it also
  takes the proto field names); 64-bit integers as numbers or strings (both taken);
* unknown fields are ignored (receivers MUST ignore them).

Answers go back in JSON too (:func:`to_json`): ``ExportTraceServiceResponse`` and ``google.rpc.Status``
bodies, camelCase keys.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

from google.protobuf import json_format  # type: ignore[import-untyped,unused-ignore]
from google.protobuf.message import Message  # type: ignore[import-untyped,unused-ignore]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

__all__ = ["JSON_MEDIA_TYPE", "from_json", "to_json"]

JSON_MEDIA_TYPE: Final = "application/json"
_ID_KEYS: Final = ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id")


def from_json(payload: bytes) -> ExportTraceServiceRequest:
    """An ``ExportTraceServiceRequest`` from OTLP/JSON bytes (UTF-8).

    Raises:
        ValueError: naming the problem (not JSON, a field of the wrong type, an id that is not hex).
    """
    try:
        document = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the body is not JSON: {type(exc).__name__}") from None
    except (RecursionError, ValueError):  # nested too deep; an integer over int_max_str_digits
        raise ValueError("the body is not usable JSON (nested too deep or a number too long)") from None
    if not isinstance(document, dict):
        raise ValueError("the body is not a JSON object (an ExportTraceServiceRequest)")
    for span in _spans_and_links(document):
        _hex_ids_to_base64(span)
    request = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(document, request, ignore_unknown_fields=True)
    except json_format.ParseError as exc:
        raise ValueError(f"not an ExportTraceServiceRequest: {_first_line(str(exc))}") from None
    except RecursionError:
        raise ValueError("not an ExportTraceServiceRequest: nested too deep") from None
    return request


def to_json(message: Message) -> bytes:
    """A protobuf message as OTLP/JSON bytes (camelCase keys, compact)."""
    text = json_format.MessageToJson(message, indent=None, preserving_proto_field_name=False)
    return str(text).encode("utf-8")


def _items(container: Any, *keys: str) -> list[Any]:
    for key in keys:
        value = container.get(key) if isinstance(container, dict) else None
        if isinstance(value, list):
            return value
    return []


def _spans_and_links(document: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for resource_spans in _items(document, "resourceSpans", "resource_spans"):
        for scope_spans in _items(resource_spans, "scopeSpans", "scope_spans"):
            for span in _items(scope_spans, "spans"):
                if isinstance(span, dict):
                    found.append(span)
                    found.extend(link for link in _items(span, "links") if isinstance(link, dict))
    return found


def _hex_ids_to_base64(item: dict[str, Any]) -> None:
    for key in _ID_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            try:
                raw = binascii.unhexlify(value)
            except (binascii.Error, ValueError):
                raise ValueError(f"{key}: expected a hex string (OTLP/JSON), got {value[:40]!r}") from None
            item[key] = base64.b64encode(raw).decode("ascii")


def _first_line(text: str) -> str:
    return text.splitlines()[0][:200] if text else "invalid"
