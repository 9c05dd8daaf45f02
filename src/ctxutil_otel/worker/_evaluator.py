"""``Evaluator``: the engine both capture paths share (sample, admit, evaluate off the request path,
emit, account for every interaction)."""

from __future__ import annotations

import atexit
import logging
import weakref
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, SupportsIndex
from uuid import UUID

from .._accounting import Admission, DropReason
from .._fork import ForkSafeLock
from .._selection import SelectionFacts
from .._settings import Settings, SettingsError
from ..emit._destinations import sdk_disabled, warn_if_nowhere
from ..emit._from_settings import build_emitter
from ..judges._from_settings import build_judge
from ..metric._contextual_utilization import ContextualUtilization
from ..sampling import TraceIdRatioSampler
from ._engine import Engine
from ._process import ChildProcessJudging
from ._record import (
    ArgumentError,
    ArgumentReadError,
    Call,
    call_of,
    interaction_of_call,
    metadata_keys_read,
)
from ._stats import EvaluatorStats
from ._ticket import Ticket
from ._types import EvaluationEmitter

if TYPE_CHECKING:
    from opentelemetry import _logs, metrics, trace
    from opentelemetry.trace import SpanContext

__all__ = ["Evaluator", "EvaluatorStats"]

#: The settings that shape what the emitter emits (the ``Emitter`` arguments of the same names).
EMISSION_SETTINGS = ("capture_content", "application_name", "max_content_chars")

_log = logging.getLogger("ctxutil_otel.worker")
#: The key under which record_interaction's first unexpected error is logged (no argument names it).
_UNEXPECTED: Final = "<unexpected>"


class Evaluator:
    """Samples captured RAG interactions and evaluates them on a background thread.

    One daemon thread runs an asyncio loop with up to ``max_concurrency`` evaluations in flight, each
    under ``evaluation_timeout_s``, with OpenTelemetry instrumentation suppressed during the judge
    call. Each result goes to ``emitter.emit(interaction, result, duration_s)``. Every interaction
    offered to :meth:`admit` ends in exactly one outcome, counted in :meth:`stats`:
    ``sampled_out``, ``dropped`` (by reason), ``evaluated``, ``not_applicable`` or ``failed`` (by
    ``error.type``).

    Use it like an OpenTelemetry span processor: ``ev.admit(trace_id).submit(interaction)`` on the
    request path (neither blocks nor raises): :meth:`admit` answers with a :class:`Ticket`, closed
    exactly once by ``submit(interaction)`` or ``drop(reason)``, or with a refusal it already counted;
    ``force_flush()`` when results must be out (tests, batch jobs), ``shutdown()`` at the end. An
    interpreter-exit hook calls ``shutdown(shutdown_timeout_s)``; it runs before the OpenTelemetry
    providers' own exit hooks only if the providers were created first (``atexit`` runs last-registered
    first), so create the providers before the evaluator, or call ``shutdown()`` yourself before shutting
    them down.

    The worker thread's CPU is budgeted (``max_worker_cpu_fraction``, default 3% of one core): it
    shares Python's GIL with the application's threads, so its CPU share, not its number of
    evaluations, is what the request path pays. While the budget is spent the worker waits before
    starting the next evaluation; interactions wait in the queue (when it is full, submits are
    dropped ``queue_full``). ``stats().cpu_throttled_s`` tells how long it waited. Work a judge
    hands to other threads (``asyncio.to_thread``) is not measured.

    With ``worker="process"`` (``CTXUTIL_WORKER=process``) the judge and the metric run in a child process
    (``multiprocessing``, ``spawn``) started at the first evaluation; this process converts, pipes the
    strings and emits, so the CPU budget covers only that. Same accounting and deadlines; a child that dies
    fails its in-flight evaluations with ``error.type`` ``worker_crashed`` and is replaced; a ``metric``
    passed in must be picklable (``TypeError`` otherwise). Which worker to choose: docs/worker.md.

    Judges must be asyncio-cooperative: a judge that blocks the loop (synchronous I/O, long CPU work)
    stalls the worker and defeats the timeout, though never the request path.

    After ``os.fork()`` the child gets a fresh queue, thread and counters (starting at zero) and
    keeps evaluating; what was queued in the parent stays the parent's.

    Args:
        metric: The metric to run; ``None`` builds :class:`ContextualUtilization` from the settings
            (``judge``, ``judge_model``, ``judge_base_url``, ``threshold``, ``mode``). A metric passed
            in is used as is, and those settings are ignored.
        emitter: Receives results; ``None`` builds ``ctxutil_otel.emit.Emitter`` on the providers below
            from the settings (``capture_content``, ``application_name``, ``max_content_chars``).
            Exceptions from the emitter are caught, counted in ``emit_errors`` and logged once; they
            never stop the worker. An ``Emitter`` passed in wins over the environment for those three
            settings (``settings`` then reports the emitter's values); an explicit argument that
            disagrees with it is an error.
        tracer_provider / meter_provider / logger_provider: Where results go (evaluation spans, metrics,
            ``gen_ai.evaluation.result`` records). ``None``: the global providers, resolved when first
            used (as OpenTelemetry instrumentations do). Not with ``emitter`` (give them to it).
        settings: A :class:`~ctxutil_otel.Settings`; ``None`` resolves them now from the environment.
        **overrides: Any setting by name; wins over ``settings`` and the environment.

    Raises:
        SettingsError: for an unknown setting or an invalid value (naming it and its variable), or
            an emission setting that disagrees with the ``emitter`` passed in (naming both values).

    The settings are resolved once: an ``Emitter`` passed in without ``settings`` lends its own (what it
    read from the environment), so the environment is never read twice.
        TypeError: for providers passed together with an ``emitter``.

    With ``OTEL_SDK_DISABLED=true`` nothing is evaluated: every captured interaction is counted dropped,
    reason ``sdk_disabled``, no worker thread runs, and a warning says so once per process.
    """

    def __init__(
        self,
        metric: ContextualUtilization | None = None,
        *,
        emitter: EvaluationEmitter | None = None,
        settings: Settings | None = None,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        logger_provider: _logs.LoggerProvider | None = None,
        **overrides: Any,
    ) -> None:
        resolved, emitter = _settings_and_emitter(
            settings,
            emitter,
            overrides,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
        )
        self._settings = resolved
        self._metadata_read = metadata_keys_read(resolved.selection_rules, resolved.metric_dimensions)
        self._record_refused: set[str] = set()  # record_interaction's problems logged (by argument)
        self._record_refused_lock = ForkSafeLock()  # application threads test and add at once
        judging: ContextualUtilization | ChildProcessJudging
        if resolved.worker == "process":  # the child builds the judge (a metric given is pickled to it)
            judging = ChildProcessJudging(
                settings=resolved,
                metric=metric,
                timeout_s=resolved.evaluation_timeout_s,
                max_in_flight=resolved.max_concurrency,
            )
        else:
            judging = metric = _metric_from(resolved) if metric is None else metric
        disabled = sdk_disabled()
        if disabled:
            warn_if_nowhere(tracer_provider, meter_provider, logger_provider)
        self._metric = metric
        self._emitter = emitter
        self._engine = engine = _engine_from(resolved, judging, emitter, disabled=disabled)
        self._atexit = _hook(self, engine, resolved.shutdown_timeout_s)

    # --- request path -------------------------------------------------------------------------
    def admit(
        self, trace_id: int, facts: SelectionFacts | None = None, *, lost: DropReason | None = None
    ) -> Ticket | Admission:
        """Count one captured interaction and decide, at once, whether it will be evaluated: the one way
        an interaction enters the evaluator.

        First selection, deterministic in ``trace_id`` (the 128-bit OpenTelemetry trace id as an
        ``int``): the first of the ``selection_rules`` matching ``facts`` (what the capture path knows:
        root run name, tags, metadata; or ``service.name``, span name, attributes) decides with its own
        rate, counted ``not_selected`` when it says no; with no match (or no rules, or ``facts=None``)
        the ``sample_rate`` decides, counted ``sampled_out`` when it says no. Either rate is the rule of
        OpenTelemetry's ``TraceIdRatioBased``: sampled when the low 64 bits of the trace id are below
        ``round(rate * 2**64)``.
        Then admission, before the caller spends anything on capturing it: after shutdown -> dropped
        ``shutdown``; queue at ``max_queue_size`` -> ``queue_full``; rate cap exceeded ->
        ``rate_limited`` (the cap's token is taken here, so the cap counts interactions admitted at
        capture); judge token budget spent -> ``token_budget``. A refusal is counted and logged at most
        once per 10 s per reason.

        ``lost``: the interaction is already lost (evicted from a buffer, still buffered at shutdown,
        not evaluable): it is counted ``sampled_out`` / ``not_selected`` when selection would not have
        selected it, else ``dropped`` with ``lost``, without admission (no rate-cap token, no look at the
        queue or the budgets, so lost interactions never eat the cap of valid ones); always refused.

        Returns a :class:`~ctxutil_otel.worker.Ticket` when admitted (truthy): close it exactly once,
        with ``ticket.submit(interaction)`` or ``ticket.drop(reason)`` (a second close, or a ticket
        garbage-collected open, warns :class:`~ctxutil_otel.worker.TicketWarning`; the latter is counted
        ``dropped`` ``internal_error``). Refused: an :class:`~ctxutil_otel.worker.Admission` (falsy,
        ``refused`` says how it was counted; its ``submit`` / ``drop`` do nothing): the interaction is
        accounted for; capture nothing more. Never raises.
        """
        return self._engine.admit(trace_id, facts, lost)

    def record_interaction(
        self,
        *,
        query: str,
        retrieved_content: Iterable[object],
        actual_output: str,
        model: str | None = None,
        provider: str | None = None,
        retriever_name: str | None = None,
        name: str | None = None,
        metadata: Mapping[str, object] | None = None,
        span_context: SpanContext | None = None,
        interaction_id: str | SupportsIndex | UUID | None = None,
    ) -> bool:
        """Evaluate one finished RAG interaction of an application without a framework (the seed's field
        names, as ``DatasetItem``); the call for code that retrieves and generates by itself (the OpenAI
        SDK and a vector store: docs/no-framework.md).

        Args:
            query: The user's question (``None`` or blank: dropped ``not_evaluable``).
            retrieved_content: The chunks that reached the prompt, in order, as a list (or any iterable,
                copied at the call, on the caller's thread, and only when the call is sampled and
                admitted: a call not sampled never reads it), at most ``MAX_CHUNKS`` (10,000): no more
                than 10,001 are read (an endless iterator included), and more fails ``invalid_input``
                naming the field and the limit. Each: a string, a LangChain ``Document``, or a mapping
                with ``text`` (or ``page_content`` / ``content``) and optionally ``id`` and ``metadata``
                (emitted per chunk as ``ctxutil.chunks.{i}.id`` / ``.metadata.<key>`` for
                ``chunk_metadata_keys``). One string, one mapping or ``None`` is not a list of chunks:
                failed ``invalid_input``.
            actual_output: The generated answer (``""`` is an empty answer, scored; ``None``: no answer,
                dropped ``not_evaluable``).
            model / provider: The ANSWERING model and its provider (dimensions ``gen_ai.request.model``
                and ``gen_ai.provider.name``), when you want results sliced by them.
            retriever_name: Dimension ``ctxutil.retriever.name``.
            name: The interaction's name: what selection rules' ``root_name`` matches, and the dimension
                ``ctxutil.chain.name``.
            metadata: What selection rules' ``metadata`` matches; its ``metric_dimensions`` keys become
                dimensions ``ctxutil.metadata.<key>``. Only those keys are read, each once with ``get``;
                the mapping is never iterated (its size costs nothing).
            span_context: The ``SpanContext`` to evaluate under; default: the current OpenTelemetry span
                (the evaluation span becomes its child, in its trace), else a new ``rag.interaction``
                root span.
            interaction_id: ``ctxutil.interaction.id`` of the result: a string, a ``uuid.UUID`` (as its
                text) or an integer (``int``, ``numpy.int64``: anything with ``__index__``, as its decimal
                text), cut to 256 characters.

        Returns ``True`` when queued; ``False`` when not selected, sampled out or refused (counted in
        :meth:`stats`). Never blocks; never raises but a ``KeyboardInterrupt`` or ``SystemExit`` from an
        argument's own code (counted dropped ``capture_error``). A wrong type or an unreadable chunk fails
        ``invalid_input`` on the worker; a dimension argument that is not a string is left out; a wrong
        ``metadata``, ``span_context`` or ``interaction_id``, or an argument whose reading raises, counts
        the call dropped ``capture_error``; each logged naming the argument, never its text
        (docs/no-framework.md).
        """
        try:
            call = call_of(
                span_context=span_context,
                model=model,
                provider=provider,
                retriever_name=retriever_name,
                name=name,
                metadata=metadata,
                metric_dimensions=self._settings.metric_dimensions,
                metadata_read=self._metadata_read,
                interaction_id=interaction_id,
            )
            self._warn_left_out(call.left_out)
        except Exception as exc:  # never raise into the application
            self._refuse_call(exc, None)
            return False
        except BaseException:  # KeyboardInterrupt, SystemExit from an argument's code: counted, not kept
            self.admit(0, None, lost="capture_error")
            raise
        ticket = self.admit(call.trace_id, call.facts)  # neither blocks nor raises
        if not ticket:  # not selected, sampled out or refused (counted): its chunks are never read
            return False
        return self._submit(ticket, call, query, retrieved_content, actual_output)

    def _submit(
        self,
        ticket: Ticket | Admission,
        call: Call,
        query: object,
        retrieved_content: object,
        actual_output: object,
    ) -> bool:
        """``record_interaction``'s admitted call: its chunks read (:func:`interaction_of_call`) and the
        interaction handed to the worker through ``ticket``; a read that raises an ``Exception`` drops the
        ticket ``capture_error`` (:meth:`_refuse_call`), any other ``BaseException`` (a generator of chunks
        raising ``KeyboardInterrupt``) drops it and is re-raised."""
        try:
            interaction = interaction_of_call(
                call, query=query, retrieved_content=retrieved_content, actual_output=actual_output
            )
        except Exception as exc:  # never raise into the application
            self._refuse_call(exc, ticket)
            return False
        except BaseException:
            ticket.drop("capture_error")
            raise
        return ticket.submit(interaction)  # neither blocks nor raises

    def _warn_left_out(self, problems: Iterable[ArgumentError]) -> None:
        """A WARNING, once per argument, for each dimension argument left out for its type (the
        interaction is still evaluated without it: ``Call.left_out``)."""
        for problem in problems:
            if self._first_time(problem.argument):
                _log.warning(
                    "ctxutil evaluator: record_interaction: %s; the interaction is evaluated without it "
                    "(logged once per argument)",
                    problem,
                )

    def _refuse_call(self, exc: Exception, ticket: Ticket | Admission | None) -> None:
        """Count a ``record_interaction`` call that failed as dropped ``capture_error`` (through its
        ``ticket`` when admitted, else with trace id 0: unknown) and log why, once per argument: a wrong
        type (WARNING), an argument whose reading raised (ERROR naming the argument and the error's class,
        never its message or traceback: they may quote the user's text), or any other error (ERROR, once:
        a bug of ours)."""
        if isinstance(exc, ArgumentError):
            if self._first_time(exc.argument):
                _log.warning(
                    "ctxutil evaluator: record_interaction: %s; the interaction is counted dropped "
                    "capture_error (logged once per argument)",
                    exc,
                )
        elif isinstance(exc, ArgumentReadError):
            if self._first_time(f"reading {exc.argument}"):
                _log.error(
                    "ctxutil evaluator: record_interaction failed reading `%s`: it raised %s (counted "
                    "capture_error; logged once per argument)",
                    exc.argument,
                    exc.error_type,
                )
        elif self._first_time(_UNEXPECTED):
            _log.error("ctxutil evaluator: record_interaction failed (counted capture_error)", exc_info=exc)
        if ticket is None:
            self.admit(0, None, lost="capture_error")
        else:
            ticket.drop("capture_error")

    def _first_time(self, argument: str) -> bool:
        """Whether ``record_interaction``'s problem with ``argument`` is logged now (once per argument, the
        test and the add under one lock: application threads may meet the same problem at once)."""
        with self._record_refused_lock:
            if argument in self._record_refused:
                return False
            self._record_refused.add(argument)
            return True

    def would_sample(self, trace_id: int, facts: SelectionFacts | None = None) -> bool:
        """The selection decision of :meth:`admit` alone (rules with ``facts``, else ``sample_rate``);
        counts nothing, hands nothing over, never raises. For a capture path that must decide whether to
        do capture work before it can count."""
        return self._engine.would_sample(trace_id, facts)

    @property
    def selection_bound(self) -> int:
        """The highest trace-id bound of ``sample_rate`` and every selection rule's rate: a trace whose
        low 64 bits are at or above it is selected by nothing (the ratio decisions nest), so a capture
        path may skip it before reading anything (the span processor does)."""
        selection = self._engine.selection
        if selection is None:
            return TraceIdRatioSampler.bound_for_rate(self._settings.sample_rate)
        return selection.bound

    # --- lifecycle ----------------------------------------------------------------------------
    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait until every interaction submitted before this call has finished (evaluated and
        emitted, or failed), or the deadline passes. Returns ``True`` when all finished in time.
        Does not flush the OpenTelemetry providers (call theirs after this one)."""
        return self._engine.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: int | None = None) -> bool:
        """Stop accepting work (further submits are dropped ``shutdown``), finish pending evaluations
        within ``timeout_millis`` (default: the ``shutdown_timeout_s`` setting, 5 s, the one shutdown
        default of the evaluator, the handler, the span processor and the receiver), count whatever
        is left as dropped ``shutdown``, and stop the thread. Returns ``True`` when nothing was left.
        Idempotent (later calls return ``True``)."""
        if timeout_millis is None:
            timeout_millis = int(self._settings.shutdown_timeout_s * 1000)
        try:
            return self._engine.shutdown(timeout_millis)
        finally:
            atexit.unregister(self._atexit)

    def stats(self) -> EvaluatorStats:
        """A consistent snapshot of the counters (see :class:`EvaluatorStats`)."""
        return self._engine.stats()

    @property
    def settings(self) -> Settings:
        """The resolved settings (the capture paths read ``run_ttl_s`` and ``max_pending_runs``)."""
        return self._settings

    @property
    def metric(self) -> ContextualUtilization:
        """The metric evaluated. With ``worker="process"`` and no metric passed in, the child builds the
        one it runs; this is a copy built from the same settings on first access."""
        if self._metric is None:
            self._metric = _metric_from(self._settings)
        return self._metric

    @property
    def emitter(self) -> EvaluationEmitter:
        return self._emitter

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        s = self._settings
        return (
            f"Evaluator(sample_rate={s.sample_rate}, judge={s.judge!r}, max_queue_size={s.max_queue_size}, "
            f"max_concurrency={s.max_concurrency}, shutdown={self._engine.is_shutdown})"
        )


def _settings_and_emitter(
    settings: Settings | None,
    emitter: EvaluationEmitter | None,
    overrides: Mapping[str, Any],
    *,
    tracer_provider: trace.TracerProvider | None,
    meter_provider: metrics.MeterProvider | None,
    logger_provider: _logs.LoggerProvider | None,
) -> tuple[Settings, EvaluationEmitter]:
    """The settings, resolved once (``overrides`` > ``settings``, else the emitter's own, else the
    environment > defaults), and the emitter: built from them on the providers, or the one passed in,
    whose emission settings win (:func:`_agree_with_emitter`)."""
    if emitter is None:
        resolved = Settings(**overrides) if settings is None else settings.merged(**overrides)
        emitter = build_emitter(
            resolved,
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            logger_provider=logger_provider,
        )
        return resolved, emitter
    given = [
        name
        for name, value in (
            ("tracer_provider", tracer_provider),
            ("meter_provider", meter_provider),
            ("logger_provider", logger_provider),
        )
        if value is not None
    ]
    if given:
        raise TypeError(
            f"{', '.join(given)} and emitter= were both passed: the emitter already has its "
            "providers; give them to Emitter(...), or omit emitter= to let the Evaluator build "
            "one on them"
        )
    if settings is None:  # an Emitter that read the environment: its reading, not a second one
        settings = getattr(emitter, "settings", None)
    resolved = settings.merged(**overrides) if isinstance(settings, Settings) else Settings(**overrides)
    return _agree_with_emitter(resolved, emitter, overrides), emitter


def _engine_from(
    settings: Settings,
    judging: ContextualUtilization | ChildProcessJudging,
    emitter: EvaluationEmitter,
    *,
    disabled: bool,
) -> Engine:
    """The engine the settings configure, its outcome metrics registered on ``emitter`` (through weak
    references: the callbacks never keep it alive)."""
    engine = Engine(
        judging,
        emitter,
        sample_rate=settings.sample_rate,
        selection_rules=settings.selection_rules,
        max_queue_size=settings.max_queue_size,
        max_concurrency=settings.max_concurrency,
        timeout_s=settings.evaluation_timeout_s,
        rate_limit=settings.rate_limit,
        token_budget=settings.token_budget,
        cpu_fraction=settings.cpu_fraction,
        disabled=disabled,
    )
    engine_ref = weakref.ref(engine)
    try:
        emitter.observe(  # positional: wrappers forwarding ``*args`` keep working
            _weak_outcomes(engine_ref), _weak_queue_size(engine_ref), _weak_cpu_throttled_s(engine_ref)
        )
    except Exception:
        _log.exception("ctxutil evaluator: emitter.observe raised; outcome metrics are not registered")
    return engine


def _hook(evaluator: Evaluator, engine: Engine, shutdown_timeout_s: float) -> Callable[[], None]:
    """Tie ``engine`` to ``evaluator``'s life: dropping the Evaluator lets the thread finish the queue and
    end (the engine outlives it only while draining), and an interpreter-exit hook shuts it down. Weak
    references keep the exit hook from holding anything alive. Returns the hook (to unregister)."""
    finalizer = weakref.finalize(evaluator, engine.close)
    finalizer.atexit = False
    engine_ref = weakref.ref(engine)
    timeout_ms = int(shutdown_timeout_s * 1000)

    def _shutdown_at_exit() -> None:
        if (alive := engine_ref()) is not None:
            alive.shutdown(timeout_ms)

    atexit.register(_shutdown_at_exit)
    return _shutdown_at_exit


def _metric_from(settings: Settings) -> ContextualUtilization:
    return ContextualUtilization(
        judge=build_judge(settings), threshold=settings.threshold, mode=settings.mode
    )


def _weak_outcomes(
    engine_ref: weakref.ReferenceType[Engine],
) -> Callable[[], Mapping[tuple[str, str | None], int]]:
    def outcomes() -> Mapping[tuple[str, str | None], int]:
        engine = engine_ref()
        return {} if engine is None else engine.outcomes()

    return outcomes


def _weak_queue_size(engine_ref: weakref.ReferenceType[Engine]) -> Callable[[], int]:
    def queue_size() -> int:
        engine = engine_ref()
        return 0 if engine is None else engine.queue_size()

    return queue_size


def _weak_cpu_throttled_s(engine_ref: weakref.ReferenceType[Engine]) -> Callable[[], float]:
    def cpu_throttled_s() -> float:
        engine = engine_ref()
        return 0.0 if engine is None else engine.cpu_throttled_s()

    return cpu_throttled_s


def _agree_with_emitter(settings: Settings, emitter: object, explicit: Mapping[str, Any]) -> Settings:
    """``settings`` with the emission settings of an ``Emitter`` passed in (it is what emits, so it wins
    over the environment and the defaults). An explicit argument that disagrees with it is an error:
    one of the two would be silently ignored. Emitters without these attributes are left alone."""
    problems: list[tuple[str, str]] = []
    adopted: dict[str, Any] = {}
    for name in EMISSION_SETTINGS:
        if not hasattr(emitter, name):
            continue
        value = getattr(emitter, name)
        if name in explicit and explicit[name] != value:
            problems.append(
                (
                    name,
                    f"argument {name}={explicit[name]!r} disagrees with the emitter passed in "
                    f"({name}={value!r}): the emitter wins, as it is what emits; pass {name} to "
                    "Emitter(...) instead, or omit emitter= (and pass tracer_provider=/meter_provider=/"
                    "logger_provider=) to let the Evaluator build it from the settings",
                )
            )
        elif getattr(settings, name) != value:
            adopted[name] = value
    if problems:
        raise SettingsError(problems)
    return settings.merged(**adopted)
