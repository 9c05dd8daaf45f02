"""The :class:`Emitter`: one :class:`~ctxutil_otel.MetricEvaluationResult` -> OpenTelemetry telemetry.

DESIGN.md, "Emission (OpenTelemetry)". The evaluated span has ended by the time the judge answers, so the
result goes on a new span (child of and linked to the evaluated span), on a ``gen_ai.evaluation.result``
log record carrying the evaluated span's trace and span id, and on metrics with bounded attributes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from opentelemetry import _logs, metrics, trace
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.context import Context
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from .._accounting import checked_error_type
from .._error_origin import error_origin
from .._fork import reinit_after_fork
from .._interaction import Interaction
from .._item import DatasetItem
from ..metric._results import MetricEvaluationResult
from ._attributes import (
    RESULT_EXTRACTORS,
    content_attributes,
    extract,
    interaction_attributes,
    metric_attributes,
    valid_duration,
)
from ._boundary import exportable
from ._cardinality import CardinalityLimiter
from ._chunk_attributes import chunk_attributes, not_relevant_attributes, text_source
from ._destinations import flush_providers, resolved_providers, span_attribute_limit, warn_if_nowhere
from ._identity import document_source, evaluated_service_attributes
from ._instruments import EvaluationInstruments
from ._names import (
    ATTR_APPLICATION_NAME,
    ATTR_EVALUATED_SERVICE_NAME,
    ATTR_EVALUATION_NAME,
    ATTR_NOT_RELEVANT_INDEX,
    EVENT_EVALUATION_RESULT,
    INSTRUMENTATION_SCOPE,
    SPAN_EVALUATION,
    SPAN_INTERACTION,
)
from ._observables import ObservableInstruments, OutcomeCounts
from ._options import EmitterOptions, check_int
from ._relevancy import relevancy_attributes, relevancy_of

if TYPE_CHECKING:
    from .._settings import Settings

__all__ = ["Emitter", "OutcomeCounts"]

_log = logging.getLogger("ctxutil_otel.emit")

try:
    _VERSION: str | None = version("ctxutil-otel")
except PackageNotFoundError:  # running from a source tree without installed metadata
    _VERSION = None


class Emitter:
    """Turns evaluation results into OpenTelemetry telemetry. Thread-safe; :meth:`emit` never raises.

    Args:
        tracer_provider / meter_provider / logger_provider: Providers to use. ``None`` (default) uses the
            global ones through the OpenTelemetry API, resolved at construction: until the application sets
            its providers the API hands out proxies that start delegating as soon as it does, so an emitter
            created before ``set_tracer_provider`` / ``set_meter_provider`` / ``set_logger_provider`` still
            delivers everything emitted afterwards.
        capture_content: Put query, answer, chunk text and the judge's per-chunk reasons on the telemetry
            (truncated to ``max_content_chars``). Off by default (DESIGN.md, "Content capture"): reasons are
            gated too because a judge's free-text reason routinely quotes the chunk.
        application_name: Bounded name of the application / chain, added as ``ctxutil.application.name``
            to spans, log records and every metric.
        max_content_chars: Truncation length for captured text, >= 1.
        max_chunk_attributes: At most this many chunks get ``ctxutil.chunks.{i}.*`` span attributes, >= 0.
            Fewer are emitted when the span attribute count limit (``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``,
            default 128; the SDK silently evicts the *oldest* attributes beyond it) leaves no room;
            ``ctxutil.chunks.truncated`` then says so.
        chunk_metadata_keys: Which document each chunk was, emitted with or without content capture:
            ``ctxutil.chunks.{i}.id`` (the document's id) and ``ctxutil.chunks.{i}.metadata.{key}`` for these
            keys of its metadata (default ``source``), truncated to 256 characters, never the chunk text.
            Empty: neither ids nor metadata.
        dimension_max_values / dimension_max_chars: The bound of every dimension (docs/slices.md): at most
            this many distinct values per dimension per emitter (then ``_OTHER``, counted in
            ``ctxutil.dimension.overflow`` and :attr:`dimension_overflows`, warned once per dimension),
            each cut to this many characters; the evaluated-service identity shares the value bound.

        settings: A :class:`~ctxutil_otel.Settings` the ``None`` arguments below take their values from;
            ``None``: the environment (``CTXUTIL_*``), read once here and only when an argument is ``None``.
            Kept as :attr:`settings`, so an ``Evaluator`` given this emitter reuses it instead of reading
            the environment again.

        ``None`` (the default) for an argument of ``_options.SETTINGS_ARGS`` (all but the providers,
        ``settings`` and ``max_chunk_attributes``) takes the setting of the same name, as every other
        construction path does (``build_emitter`` passes the settings).

    The first result checks where results go: when a signal's provider (given, else the global one) is
    the API's no-op, or ``OTEL_SDK_DISABLED=true``, a warning says so once per process, with the fix.

    Raises:
        ValueError: naming the argument, for ``max_content_chars < 1``, ``max_chunk_attributes < 0``,
            ``dimension_max_values < 1``, ``dimension_max_chars < 1``, a non-string ``application_name``
            or ``chunk_metadata_keys`` that are not non-empty strings.
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        logger_provider: _logs.LoggerProvider | None = None,
        settings: Settings | None = None,
        capture_content: bool | None = None,
        application_name: str | None = None,
        max_content_chars: int | None = None,
        max_chunk_attributes: int = 64,
        chunk_metadata_keys: Sequence[str] | None = None,
        dimension_max_values: int | None = None,
        dimension_max_chars: int | None = None,
    ) -> None:
        options = EmitterOptions.resolve(
            settings,
            capture_content=capture_content,
            application_name=application_name,
            max_content_chars=max_content_chars,
            chunk_metadata_keys=chunk_metadata_keys,
            dimension_max_values=dimension_max_values,
            dimension_max_chars=dimension_max_chars,
        )
        check_int("max_chunk_attributes", max_chunk_attributes, 0)
        #: The settings the emitter's setting-backed arguments came from (``None``: all were given).
        self.settings = options.settings
        self.capture_content = options.capture_content
        self.application_name = options.application_name
        self.max_content_chars = options.max_content_chars
        self.max_chunk_attributes = max_chunk_attributes
        self.chunk_metadata_keys = options.chunk_metadata_keys
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._logger_provider = logger_provider
        self._destination_checked = False
        self._tracer = trace.get_tracer(INSTRUMENTATION_SCOPE, _VERSION, tracer_provider=tracer_provider)
        self._logger = _logs.get_logger(
            INSTRUMENTATION_SCOPE, _VERSION or "", logger_provider=logger_provider
        )
        self._meter = metrics.get_meter(INSTRUMENTATION_SCOPE, _VERSION or "", meter_provider=meter_provider)
        self._instruments = EvaluationInstruments(self._meter, self._on_error)
        self._limiter = CardinalityLimiter(
            max_values=options.dimension_max_values,
            max_chars=options.dimension_max_chars,
            on_overflow=self._instruments.count_overflow,
        )
        self._lock = threading.Lock()
        self._failures: Counter[str] = Counter()
        self._observables = ObservableInstruments(self._meter, self.application_name, self._on_error)
        reinit_after_fork(self._new_locks)

    def _new_locks(self) -> None:
        """Fresh locks in a forked child: the parent's worker thread may have held one at the fork."""
        self._lock = threading.Lock()
        self._observables.new_lock()

    # ------------------------------------------------------------------------------------------ emit
    def emit(
        self,
        interaction: Interaction,
        result: MetricEvaluationResult,
        duration_s: float,
        *,
        item: DatasetItem | None = None,
    ) -> None:
        """Emit the evaluation span, the ``gen_ai.evaluation.result`` log record and the metrics, all with
        the interaction's bounded dimensions; for a result with verdicts also the ``contextual_relevancy``
        event and score point (``_relevancy``).

        Args:
            interaction: The evaluated interaction: ``parent`` (the evaluated span's context) or, when
                ``None``, ``start_time_ns`` / ``end_time_ns`` for a new root span ``rag.interaction``.
            result: The metric's result.
            duration_s: Seconds the evaluation took (judge call included); the evaluation span ends now and
                starts ``duration_s`` earlier. Negative or non-finite: the span is instantaneous and the
                duration histogram is not recorded.
            item: The validated item, when the caller has it: the source of chunk, query and answer text
                under content capture (otherwise taken from ``interaction``).

        Never raises: a failing part (one attribute, the span, the log record, a metric) is skipped, logged
        once per part as a WARNING on ``ctxutil_otel.emit`` (its class and place, never its message) and
        counted in :attr:`failures`.
        """
        if not self._destination_checked:
            self._destination_checked = True
            self._guard("destination", self._check_destination)
        try:
            end_ns = time.time_ns()
            duration = valid_duration(duration_s)
            # Everything below reaches an exporter: it passes the boundary (redaction, 64-bit ints) here.
            common = exportable(extract(RESULT_EXTRACTORS, result, self._on_error))
            bounded = exportable(self._dimensions(interaction))
            context = exportable(interaction_attributes(interaction, self.application_name))
            context.update(bounded)
            common.update(context)
            content = (
                exportable(content_attributes(interaction, item, self.max_content_chars))
                if self.capture_content
                else {}
            )
            evaluated = self._evaluated_span_context(interaction)
        except Exception as exc:
            self._on_error("emit", exc)
            return
        content.update(self._not_relevant(result, interaction, item))
        self._guard(
            "span",
            lambda: self._emit_span(result, evaluated, common, content, interaction, item, end_ns, duration),
        )
        self._guard("log", lambda: self._emit_log(evaluated, {**common, **content}, end_ns, result.label))
        relevancy: float | None = None
        try:
            relevancy = relevancy_of(result)
            if relevancy is not None:
                attributes = relevancy_attributes(relevancy, result, common, context)
                self._guard("log", lambda: self._emit_log(evaluated, attributes, end_ns, "relevancy"))
        except Exception as exc:
            relevancy = None
            self._on_error("relevancy", exc)
        self._record_metrics(result, duration, relevancy, bounded)

    def _not_relevant(
        self, result: MetricEvaluationResult, interaction: Interaction, item: DatasetItem | None
    ) -> dict[str, AttributeValue]:
        """``ctxutil.chunks.not_relevant.*`` for the span and the event; ``{}`` (reported) when it fails."""
        try:
            return not_relevant_attributes(
                result,
                max_chunks=self.max_chunk_attributes,
                capture_content=self.capture_content,
                max_content_chars=self.max_content_chars,
                text_of=text_source(result, interaction, item),
                document_of=document_source(interaction),
                with_ids=bool(self.chunk_metadata_keys),
            )
        except Exception as exc:
            self._on_error(ATTR_NOT_RELEVANT_INDEX, exc)
            return {}

    def _dimensions(self, interaction: Interaction) -> dict[str, AttributeValue]:
        """The interaction's dimensions and sender identity, bounded (safe as metric attributes)."""
        bounded: dict[str, AttributeValue] = {}
        dimensions = getattr(interaction, "dimensions", None)
        if isinstance(dimensions, Mapping) and dimensions:
            bounded.update(self._limiter.bound(dimensions))
        sender = evaluated_service_attributes(interaction)
        if sender:
            bounded.update(self._limiter.bound_group(ATTR_EVALUATED_SERVICE_NAME, sender))
        return bounded

    def _emit_span(
        self,
        result: MetricEvaluationResult,
        evaluated: SpanContext,
        common: dict[str, AttributeValue],
        content: dict[str, AttributeValue],
        interaction: Interaction,
        item: DatasetItem | None,
        end_ns: int,
        duration: float | None,
    ) -> None:
        attributes = {**common, **content}
        per_chunk = (5 if self.capture_content else 3) + (
            1 + len(self.chunk_metadata_keys) if self.chunk_metadata_keys else 0
        )
        room = self.max_chunk_attributes
        limit = span_attribute_limit(self._tracer_provider or trace.get_tracer_provider())
        if limit is not None:
            room = min(room, max(0, (limit - len(attributes) - 1) // per_chunk))
        attributes.update(
            exportable(
                chunk_attributes(
                    result,
                    max_chunks=room,
                    capture_content=self.capture_content,
                    max_content_chars=self.max_content_chars,
                    text_of=text_source(result, interaction, item),
                    on_error=self._on_error,
                    document_of=document_source(interaction),
                    metadata_keys=self.chunk_metadata_keys,
                )
            )
        )
        start_ns = end_ns - int(duration * 1e9) if duration is not None else end_ns
        valid = evaluated.is_valid
        span = self._tracer.start_span(
            SPAN_EVALUATION,
            context=trace.set_span_in_context(NonRecordingSpan(evaluated)) if valid else Context(),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=[Link(evaluated)] if valid else None,
            start_time=start_ns,
        )
        try:
            if result.label == "error":
                span.set_status(Status(StatusCode.ERROR, checked_error_type(result.error_type)))
        finally:
            span.end(end_time=end_ns)

    def _emit_log(
        self, evaluated: SpanContext, attributes: dict[str, AttributeValue], end_ns: int, label: str
    ) -> None:
        error = label == "error"
        record = LogRecord(
            timestamp=end_ns,
            context=trace.set_span_in_context(NonRecordingSpan(evaluated)),
            severity_number=SeverityNumber.WARN if error else SeverityNumber.INFO,
            severity_text="WARN" if error else "INFO",
            attributes=attributes,
            event_name=EVENT_EVALUATION_RESULT,
        )
        self._logger.emit(record)

    def _record_metrics(
        self,
        result: MetricEvaluationResult,
        duration: float | None,
        relevancy: float | None,
        bounded: dict[str, AttributeValue],
    ) -> None:
        try:
            attributes = {**metric_attributes(result, self.application_name), **bounded}
            base: dict[str, AttributeValue] = {ATTR_EVALUATION_NAME: str(result.metric_name), **bounded}
            if self.application_name:
                base[ATTR_APPLICATION_NAME] = self.application_name
        except Exception as exc:
            self._on_error("metrics", exc)
            return
        self._instruments.record(result, duration, relevancy, attributes)
        self._instruments.record_tokens(result, base)

    # ------------------------------------------------------------------------------- observables
    def observe(
        self,
        outcomes: Callable[[], OutcomeCounts],
        queue_size: Callable[[], int],
        cpu_throttled_s: Callable[[], float] | None = None,
    ) -> None:
        """Register the evaluator's observable instruments, read from these callables at collection time
        only (nothing on the request path):

        * ``ctxutil.evaluations`` (ObservableCounter, ``{evaluation}``): ``outcomes()`` returns cumulative
          counts ``{(outcome, detail): n}``; each becomes one observation with ``outcome``, plus
          ``error.type`` = detail for ``failed`` (``_OTHER`` when ``None``) or ``reason`` = detail for
          ``dropped`` (``unknown`` when ``None``); details of other outcomes are not attributes (their
          counts merge).
        * ``ctxutil.queue.size`` (ObservableGauge, ``{interaction}``): ``queue_size()``, an ``int`` >= 0.
        * ``ctxutil.worker.cpu_throttled`` (ObservableCounter, unit ``s``; Prometheus
          ``ctxutil_worker_cpu_throttled_seconds_total``): ``cpu_throttled_s()`` returns the cumulative wall
          seconds the worker waited on its CPU budget (``EvaluatorStats.cpu_throttled_s``), a finite
          ``float`` >= 0. Its rate is the share of time the worker was throttled. ``None``: not reported.

        A source that raises or returns an invalid value reports nothing for its instrument at that
        collection and is counted in :attr:`failures` under the metric's name; the others still report.
        Calling again replaces all three sources (``None`` stops the throttle counter); the instruments
        are registered once.
        """
        self._observables.observe(outcomes, queue_size, cpu_throttled_s)

    # ---------------------------------------------------------------------------------- flushing
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Flush the providers this emitter writes to (the given ones, else the global SDK ones).

        Returns ``True`` when every provider that supports ``force_flush`` flushed in time; providers
        without it (API no-op / proxy providers) are skipped. Never raises.
        """
        providers = resolved_providers(self._tracer_provider, self._meter_provider, self._logger_provider)
        return flush_providers(providers, timeout_millis, self._on_error)

    @property
    def tracer_provider(self) -> trace.TracerProvider:
        """The tracer provider evaluation spans go to: the one given, else the global one (read now)."""
        return resolved_providers(self._tracer_provider, self._meter_provider, self._logger_provider)[0]

    def _check_destination(self) -> None:
        warn_if_nowhere(self._tracer_provider, self._meter_provider, self._logger_provider)

    @property
    def failures(self) -> dict[str, int]:
        """How often each part failed (attribute key, ``span``, ``log``, a metric name, ``emit``)."""
        with self._lock:
            return dict(self._failures)

    @property
    def dimension_overflows(self) -> dict[str, int]:
        """Values reported as ``_OTHER`` per dimension (attribute name) since this emitter was made; also
        exported as the ``ctxutil.dimension.overflow`` counter."""
        return self._limiter.overflowed()

    # ----------------------------------------------------------------------------------- helpers
    def _on_error(self, key: str, exc: BaseException) -> None:
        with self._lock:
            first = key not in self._failures
            self._failures[key] += 1
        if first:
            # Once per part, a WARNING: the result's telemetry (or part of it) did not go out. Its class and
            # place only, never the message (a user object's may quote the application's data).
            _log.warning("emitting %s failed (logged once): %s", key, error_origin(exc))

    def _guard(self, key: str, action: Callable[[], object]) -> None:
        """``action()``; whatever it raises (any class: a user's chunk object may raise ``SystemExit``, and
        emission awaits nothing, so no ``CancelledError`` is ours) skips that part (:meth:`_on_error`)."""
        try:
            action()
        except BaseException as exc:
            self._on_error(key, exc)

    def _evaluated_span_context(self, interaction: Interaction) -> SpanContext:
        """The evaluated span's context, or that of a new root span ``rag.interaction`` when there is none."""
        parent = interaction.parent
        if isinstance(parent, SpanContext) and parent.is_valid:
            return parent
        start = interaction.start_time_ns if interaction.start_time_ns > 0 else None
        end = interaction.end_time_ns if interaction.end_time_ns > 0 else None
        if start is not None and (end is None or end < start):
            end = start
        root = self._tracer.start_span(
            SPAN_INTERACTION,
            context=Context(),
            kind=SpanKind.INTERNAL,
            attributes=interaction_attributes(interaction, self.application_name),
            start_time=start,
        )
        root.end(end_time=end)
        return root.get_span_context()
