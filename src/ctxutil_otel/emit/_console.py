"""Compact one-line console formatters for spans, log records and metrics (the demo's console output).

The SDK's console exporters print every signal as indented JSON (about 250 lines per evaluation); these
formatters print one line per span or log record and one line per metric point, so a person can read the
telemetry as it arrives. Pass them as the ``formatter`` of the SDK's ``Console*Exporter`` classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk.metrics.export import HistogramDataPoint, MetricsData, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["format_log_record", "format_metrics", "format_span"]

_SHOWN = (
    "gen_ai.evaluation.name",
    "gen_ai.evaluation.score.value",
    "gen_ai.evaluation.score.label",
    "ctxutil.utilized_chunks",
    "ctxutil.total_relevant_chunks",
    "ctxutil.total_chunks",
    "error.type",
)


_LABELS = {"gen_ai.evaluation.name": "evaluation", "error.type": "error.type"}


def _short(attributes: Mapping[str, Any] | None) -> str:
    if not attributes:
        return ""
    parts = []
    for key in _SHOWN:
        if key in attributes:
            value = attributes[key]
            label = _LABELS.get(key) or key.rsplit(".", 1)[-1]
            parts.append(f"{label}={value:.3g}" if isinstance(value, float) else f"{label}={value}")
    return " ".join(parts)


def format_span(span: ReadableSpan) -> str:
    """``[span] <name> trace=<32 hex> span=<16 hex> parent=<16 hex|-> <key attributes>``."""
    ctx = span.context
    parent = f"{span.parent.span_id:016x}" if span.parent is not None else "-"
    trace_id = f"{ctx.trace_id:032x}" if ctx is not None else "-"
    span_id = f"{ctx.span_id:016x}" if ctx is not None else "-"
    return f"[span] {span.name} trace={trace_id} span={span_id} parent={parent} {_short(span.attributes)}\n"


def format_log_record(record: ReadableLogRecord) -> str:
    """``[event] <event_name> trace=<32 hex> span=<16 hex> <key attributes>``."""
    log = record.log_record
    name = getattr(log, "event_name", None) or "log"
    trace_id = f"{log.trace_id:032x}" if log.trace_id else "-"
    span_id = f"{log.span_id:016x}" if log.span_id else "-"
    return f"[event] {name} trace={trace_id} span={span_id} {_short(log.attributes)}\n"


def format_metrics(data: MetricsData) -> str:
    """One ``[metric] <name> {attributes} <value>`` line per data point (histograms: count and sum)."""
    lines = []
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                for point in metric.data.data_points:
                    attrs = ",".join(f"{k}={v!s}" for k, v in sorted((point.attributes or {}).items()))
                    if isinstance(point, HistogramDataPoint):
                        value = f"count={point.count} sum={point.sum:.4g}"
                    elif isinstance(point, NumberDataPoint):
                        value = str(point.value)
                    else:
                        value = type(point).__name__
                    lines.append(f"[metric] {metric.name} {{{attrs}}} {value}\n")
    return "".join(lines)
