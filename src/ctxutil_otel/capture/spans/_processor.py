"""``UtilizationSpanProcessor``: evaluate RAG turns found in finished spans (OpenInference, OpenTelemetry
GenAI, OpenLLMetry), in-process or behind an OTLP receiver.

Hot path (``on_end`` of a span that is not part of a RAG interaction): when traces are buffered, one
``dict`` membership test of the trace id (plus a monotonic clock read for lazy TTL eviction); then one
``frozenset.isdisjoint`` over the span's attribute keys against the four marker attributes
(``openinference.span.kind``, ``gen_ai.operation.name``, ``traceloop.span.kind``,
``llm.request.type``). Nothing is parsed, copied or locked. A non-RAG span inside a buffered trace adds
one lock-free lookup (does it enclose buffered records?). Measured in benchmarks/bench_span_processor.py.

Sampling and accounting (exact, per turn):
    The trace-id ratio decision (OpenTelemetry's ``TraceIdRatioBased`` rule, ``sample_rate``) is taken
    from the trace id before anything is read or buffered; it is deterministic, so it needs no cache
    and no counting: the spans of a sampled-out trace are never parsed or buffered, and their turns are
    never assembled, so they are not counted at all (not even ``sampled_out``: counting them would mean
    assembling them). Each turn assembled from a sampled trace is counted once (one ``captured``)
    by exactly one call: a turn that closes and converts to an interaction is admitted with
    ``Evaluator.admit(trace_id)`` (which takes a rate-cap token, and may refuse it, counted
    ``dropped`` ``queue_full`` / ``rate_limited`` / ``token_budget`` / ``shutdown``), then submitted on
    the ticket it answers with, at once (a trace's buffer holds records, never an admitted turn: no
    ticket outlives the call); a turn that is already lost is counted with
    ``Evaluator.admit(trace_id, lost=reason)``, which takes no token and ignores the queue, so lost turns
    never eat the rate cap of valid ones nor hide their reason: ``not_evaluable`` (content not
    captured by the instrumentation, or unreadable: malformed/truncated attributes, a retrieval or
    model span no reader recognises, retrieval and generation spans that pair into no turn, no query,
    no answer; each cause is logged at warning level the first time it is seen, see
    :attr:`UtilizationSpanProcessor.not_evaluable_causes`); ``capture_error`` (a reader failed on one
    of the turn's spans); ``ttl_expired`` (the trace was buffered ``run_ttl_s`` seconds without its local root
    ending); ``pending_full`` (younger than that, it was the oldest trace when the ``max_pending_runs``
    traces or ``max_buffered_bytes`` bound was full: more concurrent unfinished traces than the bounds
    hold); ``shutdown`` (still buffered at shutdown). A trace holding several turns is counted once
    per turn. Records that never pair into a turn are not interactions and are not counted.

Selection rules (``selection_rules``, docs/selection.md): the trace-id filter above uses the highest rate
of ``sample_rate`` and every rule (the ratio decisions nest, so a trace above it is selected by nothing
and is skipped uncounted, as before). Each turn is then decided when it closes, by ``admit(trace_id,
facts)``: a rule sees the ENCLOSING span, the one whose end closed the turn (the chain span around the
retrieval and the generation, or the service's local root), its name (``root_name``), its attributes
(``attributes``) and its Resource's ``service.name`` (``service_name``). A turn no rule lets through is
counted ``not_selected`` (a matching rule said no) or ``sampled_out`` (no rule matched, ``sample_rate``
said no). Turns lost before they close (evicted, expired, shutdown) have no enclosing span: they are
decided by ``sample_rate`` alone. Without rules nothing of this runs (the facts are never built).

Fork safety: the processor's lock and buffer are re-created in a forked child (``os.register_at_fork``
through a weak reference, as the evaluator does): a child forked while another thread held the lock
(gunicorn, celery prefork) must not hang in ``span.end()``. The child starts with an empty buffer: the
buffered traces belong to the parent's requests, and the parent counts them.

Never re-evaluated: spans named ``contextual_utilization`` (the evaluation span) or ``rag.interaction``
(the emitter's root span), spans carrying ``gen_ai.evaluation.name``, and spans ended while
OpenTelemetry instrumentation is suppressed (the evaluator's worker runs that way).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context, get_value
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from ..._accounting import DropReason
from ..._error_origin import error_origin
from ..._fork import reinit_after_fork
from ..._selection import SelectionFacts
from ...emit._names import ATTR_EVALUATION_NAME, SPAN_EVALUATION, SPAN_INTERACTION
from ...sampling import TraceIdRatioSampler
from .._evaluator_args import resolve_evaluator
from .._reasons import TTL_EXPIRED
from .._results_check import ResultsCheck
from ._assembly import Evicted, TraceBuffer, Turn
from ._convert import NotEvaluable, to_interaction
from ._model import Generation, Retrieval
from ._route import MARKER_ATTRIBUTES, ReaderError, read_part

if TYPE_CHECKING:
    from ..._settings import Settings
    from ...worker._evaluator import Evaluator
    from ...worker._stats import EvaluatorStats

__all__ = ["DEFAULT_MAX_BUFFERED_BYTES", "MARKER_ATTRIBUTES", "UtilizationSpanProcessor", "read_part"]

_log = logging.getLogger("ctxutil_otel.capture")

#: Default bound on buffered text, approximate bytes.
DEFAULT_MAX_BUFFERED_BYTES: Final = 64 * 1024 * 1024

_OWN_SPAN_NAMES = frozenset({SPAN_EVALUATION, SPAN_INTERACTION})
_OWN_ATTRIBUTES = frozenset({ATTR_EVALUATION_NAME})
_LOW_64 = (1 << 64) - 1
_SWEEP_LIMIT = 4  # traces evicted per on_end call at most (lazy TTL eviction)


class UtilizationSpanProcessor(SpanProcessor):
    """A ``SpanProcessor`` that evaluates the RAG turns of sampled traces with an Evaluator.

    ``provider.add_span_processor(UtilizationSpanProcessor())``: readers map finished spans to
    retrievals and generations (``ctxutil_otel.capture.spans`` readers), a bounded per-trace buffer pairs
    them into turns (see ``_assembly``), and each turn becomes an :class:`~ctxutil_otel.capture.Interaction`
    parented to the generation's span, submitted to the evaluator. Accounting: see the module docstring.

    ``on_start`` does nothing; ``on_end`` never blocks on I/O and never raises (errors are counted in
    :attr:`errors` and logged once); ``force_flush``/``shutdown`` delegate to the evaluator with
    deadlines. Thread-safe: ``on_end`` may be called from any thread. Fork-safe (module docstring).

    An OTLP receiver feeds it with :meth:`on_end`, from any thread, one ``ReadableSpan`` per protobuf
    span (``ReadableSpan(name=, context=SpanContext(trace_id, span_id, is_remote=False), parent=...,
    attributes=, start_time=, end_time=)``, or any object with those read-only properties, see
    :class:`~ctxutil_otel.capture.spans.SpanLike`), in the order of the request (exporters send spans in
    end order). The parent is ``None`` for an empty ``parent_span_id``, else a ``SpanContext`` whose
    ``is_remote`` comes from the OTLP span flags (``SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK``), so that each
    service's local root closes its turns. ``stats().queue_size`` against ``max_queue_size`` tells it
    when to answer with the retryable status.

    Args:
        evaluator: The :class:`~ctxutil_otel.worker.Evaluator`; ``None`` builds one from the settings
            (``settings_overrides`` > ``CTXUTIL_*`` environment > defaults).
        clock: Monotonic clock in seconds for the buffer TTL (default ``time.monotonic``; for tests).
        max_buffered_bytes: Bound on the approximate bytes of buffered text (default 64 MiB).
        **settings_overrides: ``tracer_provider=``, ``meter_provider=``, ``logger_provider=``: where the
            results go (default: the global providers, resolved when first used; without an explicit
            ``evaluator`` only); warned once when the spans come from another provider. Settings by
            name: ``run_ttl_s`` (seconds a trace may stay buffered waiting for its root) and
            ``max_pending_runs`` (buffered traces at most) bound the buffer; with an explicit
            ``evaluator`` only those two are accepted.

    Raises:
        ctxutil_otel._settings.SettingsError: for an unknown setting or an invalid value.
        TypeError: for evaluator settings passed together with an explicit ``evaluator``.
        ValueError: for a negative ``max_buffered_bytes``.
    """

    def __init__(
        self,
        evaluator: Evaluator | None = None,
        *,
        clock: Callable[[], float] | None = None,
        max_buffered_bytes: int = DEFAULT_MAX_BUFFERED_BYTES,
        **settings_overrides: Any,
    ) -> None:
        if (
            isinstance(max_buffered_bytes, bool)
            or not isinstance(max_buffered_bytes, int)
            or max_buffered_bytes < 0
        ):
            raise ValueError(f"max_buffered_bytes must be an int >= 0, got {max_buffered_bytes!r}")
        evaluator, settings = resolve_evaluator(evaluator, settings_overrides, owner="the span processor")
        self.evaluator: Evaluator = evaluator
        self.settings: Settings = settings
        self._clock = clock or time.monotonic
        bound = getattr(evaluator, "selection_bound", None)
        self._bound = (
            bound if isinstance(bound, int) else TraceIdRatioSampler.bound_for_rate(settings.sample_rate)
        )
        self._select = bool(settings.selection_rules)  # build selection facts only when there are rules
        self._metadata_keys = tuple(getattr(settings, "metric_dimensions", ()))
        self._max_buffered_bytes = max_buffered_bytes
        self._shutdown = False
        self._results_check = ResultsCheck(evaluator)
        self._logged_error = False
        #: Unexpected errors caught in ``on_end`` (each logged at debug level, the first at warning).
        self.errors = 0
        self._init_state()
        reinit_after_fork(self._init_state)

    def _init_state(self) -> None:
        """(Re)create what a forked child must not share: the lock (another thread of the parent may
        have held it at the fork) and the buffer (the parent's unfinished traces, counted there)."""
        self._lock = threading.Lock()
        self._buffer = TraceBuffer(
            ttl_s=self.settings.run_ttl_s,
            max_traces=self.settings.max_pending_runs,
            max_bytes=self._max_buffered_bytes,
            clock=self._clock,
        )
        self._traces = self._buffer.traces  # the same dict, read lock-free on the hot path
        self._causes: dict[tuple[str, str], int] = {}

    # --- SpanProcessor --------------------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing but, on the first span, check that results go to the provider the spans come from
        (warned once otherwise): the processor only reads finished spans."""
        if not self._results_check.done:
            self._results_check.check(span)

    def on_end(self, span: ReadableSpan) -> None:
        """Read a finished span; buffer it if it belongs to a sampled RAG interaction; assemble and
        submit the turns it closes. Never raises."""
        try:
            traces = self._traces
            buffered = False
            if traces:
                context = span.context
                buffered = context is not None and context.trace_id in traces
                if not buffered and self._clock() >= self._buffer.next_deadline:
                    self._sweep()
            attributes = span.attributes
            if attributes is None or MARKER_ATTRIBUTES.isdisjoint(attributes):
                if buffered:
                    self._on_span(span, None)
                return
            self._on_span(span, attributes)
        except Exception:
            self._on_error()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Evict expired traces, then wait up to ``timeout_millis`` milliseconds for submitted
        interactions to be evaluated (delegates to the evaluator). Traces still waiting for their root
        are kept: they are not finished."""
        try:
            self._sweep(limit=len(self._buffer) or 1)
        except Exception:
            self._on_error()
        return self.evaluator.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: int | None = None) -> None:
        """Count the turns still buffered as dropped ``shutdown``, then shut the evaluator down within
        ``timeout_millis`` milliseconds (default: the ``shutdown_timeout_s`` setting). Idempotent."""
        with self._lock:
            self._shutdown = True
            turns = self._buffer.drain()
        self._discard(turns, "shutdown")
        if timeout_millis is None:
            timeout_millis = int(self.settings.shutdown_timeout_s * 1000)
        self.evaluator.shutdown(timeout_millis)

    # --- introspection --------------------------------------------------------------------------
    def stats(self) -> EvaluatorStats:
        """The evaluator's accounting (captured, sampled_out, dropped{reason}, evaluated, ...)."""
        return self.evaluator.stats()

    @property
    def pending_traces(self) -> int:
        """Traces buffered now (bounded by ``max_pending_runs``)."""
        return len(self._buffer)

    @property
    def buffered_bytes(self) -> int:
        """Approximate bytes of text buffered now (bounded by ``max_buffered_bytes``)."""
        return self._buffer.size

    @property
    def not_evaluable_causes(self) -> Mapping[tuple[str, str], int]:
        """Turns counted ``not_evaluable`` or ``capture_error`` by this processor, per ``(cause,
        convention)``: causes ``content_not_captured``, ``malformed``, ``truncated``, ``unrecognised``,
        ``unpaired``, ``no_query``, ``no_answer``, ``capture_error``; conventions ``openinference``,
        ``genai``, ``openllmetry`` (a closed set: bounded). A copy."""
        with self._lock:
            return dict(self._causes)

    # --- internals ------------------------------------------------------------------------------
    def _skip(self, span: ReadableSpan, attributes: Mapping[str, object]) -> bool:
        """The processor's own output, or a span ended with instrumentation suppressed."""
        if self._shutdown or span.name in _OWN_SPAN_NAMES:
            return True
        if not _OWN_ATTRIBUTES.isdisjoint(attributes):
            return True
        return bool(get_value(_SUPPRESS_INSTRUMENTATION_KEY))

    def _on_span(self, span: ReadableSpan, attributes: Mapping[str, object] | None) -> None:
        """A marked span (``attributes`` given), or any span of a buffered trace (``None`` when
        unmarked): read it, then buffer its record and close what it encloses, under the lock."""
        context = span.context
        if context is None or context.trace_id & _LOW_64 >= self._bound:
            return  # sampled out: decided from the trace id alone, never buffered, never counted
        record: Retrieval | Generation | None = None
        if attributes is not None:
            if self._skip(span, attributes):
                return
            try:
                part = read_part(attributes)
            except ReaderError:
                self._on_error()  # a reader failed on a span of unknown kind: no turn to count
                part = None
            if isinstance(part, (Retrieval, Generation)):
                record = part
        parent = span.parent
        parent_id = None if parent is None or parent.is_remote else parent.span_id
        if record is None and (
            context.trace_id not in self._traces
            or (parent_id is not None and not self._buffer.encloses(context.trace_id, context.span_id))
        ):
            return  # encloses nothing buffered (most spans of a RAG trace): no lock
        with self._lock:
            if self._shutdown:
                return
            turns, evicted = self._buffer.end_span(
                record, context, parent_id, span.start_time or 0, span.end_time or 0, span
            )
            expired = self._buffer.expire(self._clock(), _SWEEP_LIMIT)
        self._account(turns, evicted, expired, span)

    def _account(
        self, turns: list[Turn], evicted: Evicted, expired: list[Turn], closing: ReadableSpan
    ) -> None:
        """Outside the lock: submit the assembled turns (``closing``: the span that closed them, what
        selection rules see); count each evicted turn with the reason its eviction reported
        (``ttl_expired`` or ``pending_full``) and the expired ones, without admission (see
        :meth:`_discard`)."""
        if turns:
            self._submit(turns, closing, _selection_facts(closing) if self._select else None)
        for turn, reason in evicted:
            self.evaluator.admit(turn.trace_id, lost=reason)
        if expired:
            self._discard(expired, TTL_EXPIRED)

    def _sweep(self, limit: int = _SWEEP_LIMIT) -> None:
        with self._lock:
            expired = self._buffer.expire(self._clock(), limit)
        self._discard(expired, TTL_EXPIRED)

    def _submit(self, turns: list[Turn], closing: ReadableSpan, facts: SelectionFacts | None) -> None:
        """Convert each closed turn first (``closing``: the span that closed it, for its chain name), then
        admit only a convertible one: a turn that is not evaluable is already lost, so it is counted
        ``lost`` and takes no rate-cap token."""
        evaluator = self.evaluator
        for turn in turns:
            interaction = to_interaction(turn, closing, self._metadata_keys)
            if isinstance(interaction, NotEvaluable):
                self._not_evaluable(interaction)
                evaluator.admit(turn.trace_id, facts, lost=interaction.reason)
            else:
                evaluator.admit(turn.trace_id, facts).submit(interaction)

    def _not_evaluable(self, verdict: NotEvaluable) -> None:
        """Count the cause; warn the first time each ``(cause, convention)`` is seen."""
        key = (verdict.cause, verdict.convention)
        with self._lock:  # rare path: a turn already lost
            seen = self._causes.get(key, 0)
            self._causes[key] = seen + 1
        if not seen:
            _log.warning(
                "ctxutil span processor: a RAG turn is not evaluable (counted dropped %s): cause %s, "
                "%s spans; further turns with this cause are counted without this warning",
                verdict.reason,
                verdict.cause,
                verdict.convention,
            )

    def _discard(self, turns: list[Turn], reason: DropReason) -> None:
        """Count turns that are already lost (expired, still buffered at shutdown) with ``reason``,
        without admission: ``Evaluator.admit(..., lost=reason)`` takes no rate-cap token and ignores the
        queue."""
        evaluator = self.evaluator
        for turn in turns:
            evaluator.admit(turn.trace_id, lost=reason)

    def _on_error(self) -> None:
        """Count the error being handled; log it once (a WARNING, then DEBUG) by its class and where it was
        raised, never its message or traceback (a span's own object may quote the application's data)."""
        self.errors += 1
        error = sys.exc_info()[1]
        where = error_origin(error) if error is not None else "an error"
        if not self._logged_error:
            self._logged_error = True
            _log.warning("ctxutil span processor: unexpected error (counted, ignored): %s", where)
        else:
            _log.debug("ctxutil span processor: unexpected error: %s", where)


def _selection_facts(span: ReadableSpan) -> SelectionFacts:
    """What selection rules see of a turn: its enclosing span's name and attributes, and the
    ``service.name`` of that span's Resource (``None`` when the span has no Resource, e.g. a span-like
    object without one)."""
    resource = getattr(span, "resource", None)
    service = None if resource is None else resource.attributes.get("service.name")
    return SelectionFacts(
        root_name=span.name,
        service_name=service if isinstance(service, str) else None,
        attributes=span.attributes,
    )
