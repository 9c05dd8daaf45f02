"""The demo's telemetry count: spans and log records counted as the SDK ends and emits them, whatever the
exporters, so the summary can say what was made even when nothing is printed or sent (whether it was
delivered: :mod:`._export_tally`)."""

from __future__ import annotations

import threading

from opentelemetry.sdk._logs import LogRecordProcessor
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

__all__ = ["TelemetryCount"]


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
