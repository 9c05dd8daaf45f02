"""The export tally of ``ctxutil-otel demo`` and ``ctxutil-otel serve``: delegating exporters that count
the results of the exports of the exporters ``configure_telemetry`` builds (:class:`ExportTally`), so that
the command's last line can say whether its own telemetry was delivered, and its wording of that."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk._logs.export import LogRecordExporter
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["ExportTally"]

#: Why the failures' count may exceed the warnings: the SDK's exporter loggers (a ``DuplicateFilter``)
#: drop a message identical to the one before.
_WHY = "the exporters' warnings above say why; repeats are logged once"


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

    def failures(self) -> str | None:
        """``"2 exports failed (the exporters' warnings above say why; repeats are logged once)"``; ``None``
        when none failed. (The SDK's exporter loggers drop a warning identical to the one before, so there
        may be fewer warnings than failures.)"""
        failed = self.failed
        if not failed:
            return None
        return f"{failed} export{'s' * (failed != 1)} failed ({_WHY})"

    def deliveries(self) -> str:
        """``"3 exports delivered"``."""
        delivered = self.delivered
        return f"{delivered} export{'s' * (delivered != 1)} delivered"

    def describe(self) -> str:
        """The failures when any export failed, else the deliveries, else ``"nothing exported"``."""
        return self.failures() or (self.deliveries() if self.delivered else "nothing exported")

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
