"""The demo's telemetry tally: spans and log records counted as the SDK ends and emits them, whatever the
exporters, so the summary can say what was made even when nothing is printed or sent; and the results of
the exporters' exports (:class:`ExportTally`), so it can say whether it was delivered."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["ExportTally", "TelemetryCount"]


class _Counter:
    """A count that threads (the SDK's and the evaluator's) may add to."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self) -> None:
        with self._lock:
            self.value += 1


class _SpanCount(SpanProcessor):
    def __init__(self, counter: _Counter) -> None:
        self._counter = counter

    def on_end(self, span: ReadableSpan) -> None:
        self._counter.add()


class _LogCount(LogRecordProcessor):
    def __init__(self, counter: _Counter) -> None:
        self._counter = counter

    def on_emit(self, log_record: object) -> None:  # LogData before SDK 1.39, ReadWriteLogRecord after
        self._counter.add()

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class TelemetryCount:
    """Pass :attr:`span_processor` and :attr:`log_record_processor` to ``configure_telemetry``; then
    :meth:`describe` says how many spans and log records the providers made."""

    def __init__(self) -> None:
        self._spans = _Counter()
        self._logs = _Counter()
        self.span_processor: SpanProcessor = _SpanCount(self._spans)
        self.log_record_processor: LogRecordProcessor = _LogCount(self._logs)

    @property
    def spans(self) -> int:
        return self._spans.value

    @property
    def log_records(self) -> int:
        return self._logs.value

    def describe(self) -> str:
        """E.g. ``"39 spans, 38 log events and the metrics"``."""
        spans, logs = self.spans, self.log_records
        return f"{spans} span{'s' * (spans != 1)}, {logs} log event{'s' * (logs != 1)} and the metrics"


class ExportTally:
    """Counts the exports that succeeded and failed: pass :meth:`wrap` as ``configure_telemetry``'s
    ``wrap_exporter``. An export that raises counts failed (and raises on: the SDK's processor logs it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.delivered = 0
        self.failed = 0

    def record(self, result: object) -> None:
        """Count ``result`` (a ``SpanExportResult``, ``MetricExportResult`` or log export result)."""
        succeeded = getattr(result, "name", None) == "SUCCESS"  # the three enums, in every SDK version
        with self._lock:
            if succeeded:
                self.delivered += 1
            else:
                self.failed += 1

    def wrap(self, exporter: Any) -> Any:
        """``exporter`` behind a delegating exporter of its kind that records each export's result."""
        if isinstance(exporter, SpanExporter):
            return _TalliedSpans(exporter, self)
        if isinstance(exporter, MetricExporter):
            return _TalliedMetrics(exporter, self)
        if isinstance(exporter, LogRecordExporter):
            return _TalliedLogs(exporter, self)
        return exporter


class _TalliedSpans(SpanExporter):
    def __init__(self, inner: SpanExporter, tally: ExportTally) -> None:
        self._inner, self._tally = inner, tally

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = SpanExportResult.FAILURE
        try:
            result = self._inner.export(spans)
        finally:
            self._tally.record(result)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class _TalliedLogs(LogRecordExporter):
    def __init__(self, inner: LogRecordExporter, tally: ExportTally) -> None:
        self._inner, self._tally = inner, tally

    def export(self, batch: Sequence[Any]) -> Any:  # LogData before SDK 1.39, ReadableLogRecord after
        result: object = None  # an export that raises: recorded failed
        try:
            result = self._inner.export(batch)
        finally:
            self._tally.record(result)
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()  # type: ignore[no-untyped-call]  # the SDK's method lacks "-> None"

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class _TalliedMetrics(MetricExporter):
    def __init__(self, inner: MetricExporter, tally: ExportTally) -> None:
        # The reader takes the exporter's preferences from these attributes (the SDK's own protocol).
        super().__init__(
            preferred_temporality=getattr(inner, "_preferred_temporality", None),
            preferred_aggregation=getattr(inner, "_preferred_aggregation", None),
        )
        self._inner, self._tally = inner, tally

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        result = MetricExportResult.FAILURE
        try:
            result = self._inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        finally:
            self._tally.record(result)
        return result

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown(timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._inner.force_flush(timeout_millis=timeout_millis)
