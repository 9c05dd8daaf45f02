"""The engine behind :class:`~ctxutil_otel.worker.Evaluator`: admission, a bounded queue, and one
daemon thread running an asyncio loop that evaluates with bounded concurrency.

Modelled on the OpenTelemetry SDK's ``BatchProcessor``: a bounded queue filled from any thread, one
daemon worker thread, ``force_flush``/``shutdown`` with deadlines, and re-initialisation in a forked
child through ``os.register_at_fork`` holding a weak reference. Where each evaluation runs is the
:class:`~ctxutil_otel.worker._types.Judging` given: on this loop (``worker="thread"``) or in a child
process (``worker="process"``, ``_process.py``); admission, accounting and emission are the same.

Admission is one chain (:meth:`Engine._admission`, then ``_admission.AdmissionChain``), asked twice.
``admit()`` (at capture, before any capture work) refuses what would be refused anyway: not running, a
full queue, no rate-cap token (taken here, once per interaction), a spent token budget. ``submit()`` asks
again without the rate cap, reserving the token budget, because the queue may fill in between.

Lifecycle (:class:`~ctxutil_otel.worker._types.Lifecycle`): ``RUNNING`` admits; ``DRAINING`` (collected,
or ``shutdown()`` waiting for its deadline) admits nothing and finishes what is queued; ``STOPPED`` counts
what is left and ends the dispatcher at once; ``DISABLED`` (``OTEL_SDK_DISABLED``) runs no thread.

Exactly-once accounting: ``admit()`` answers with a :class:`~ctxutil_otel.worker._ticket.Ticket` (or a
refusal it counted); the ticket is closed once, under the lock: dropped (counted at once), or submitted,
when it gets a sequence number and waits in the queue, then in ``_in_flight``; whoever removes it from
there under the lock (the worker when it finishes, or ``shutdown`` at its deadline) counts its outcome,
never twice. A ticket garbage-collected open is counted through ``_orphans`` (lock-free: a finalizer may
run while any lock is held), folded into the tally before every read of it. What the worker does with
each started ticket (judge, settle the token budget, emit, count) is the section "one started ticket":
the engine's lock, condition, in-flight map, tally and throttle are its own state, so it is all here.

CPU budget (``max_worker_cpu_fraction``, ``_throttle.py``): before taking the next queued interaction the
dispatcher waits while the worker thread's CPU is over its share of one core; the interaction stays queued
meanwhile, so admission, ``force_flush`` and ``shutdown`` behave as without the budget.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import cast

from .._accounting import Admission, DropReason, OutcomeKey, refused
from .._error_origin import error_origin
from .._fork import reinit_after_fork
from .._interaction import Interaction
from .._selection import SelectionFacts, SelectionRule
from ..metric._contextual_utilization import ContextualUtilization
from ..metric._results import MetricEvaluationResult
from ..sampling._rules import SelectionRules
from ..sampling._thread_cpu import thread_time_less_full_collections
from ._admission import AdmissionChain, Unselected
from ._convert import Rejection
from ._drop_log import INVALID_INPUT, DropLog
from ._evaluate import InThreadJudging
from ._loop import call_soon, run_loop
from ._stats import EvaluatorStats
from ._tally import Tally
from ._throttle import CpuThrottle, Sleep
from ._ticket import Ticket
from ._types import EvaluationEmitter, Judged, Judging, Lifecycle, outcome_of

__all__ = ["Engine", "Lifecycle"]

_log = logging.getLogger("ctxutil_otel.worker")

_LOG_INTERVAL_S = 10.0
_JOIN_GRACE_S = 0.1
_CLOSE_TIMEOUT_S = 5.0  # the process worker's child, when the engine ends without shutdown()


class Engine:
    """Not public: use :class:`~ctxutil_otel.worker.Evaluator`. See the module docstring."""

    def __init__(
        self,
        judging: ContextualUtilization | Judging,
        emitter: EvaluationEmitter,
        *,
        sample_rate: float,
        selection_rules: Sequence[SelectionRule | Mapping[str, object]] = (),
        max_queue_size: int,
        max_concurrency: int,
        timeout_s: float,
        rate_limit: float | None,
        token_budget: int | None,
        cpu_fraction: float | None = None,
        disabled: bool = False,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = thread_time_less_full_collections,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        # A metric runs on this loop (the thread worker).
        self._judging: Judging = (
            InThreadJudging(judging, timeout_s) if isinstance(judging, ContextualUtilization) else judging
        )
        self._emitter = emitter
        self._chain = AdmissionChain(
            sample_rate=sample_rate,
            selection_rules=selection_rules,
            rate_limit=rate_limit,
            token_budget=token_budget,
        )
        self._max_queue_size = max_queue_size
        self._max_concurrency = max_concurrency
        self._close_deadline: float | None = None
        self._cpu_fraction = cpu_fraction
        self._clocks = (clock, cpu_clock, sleep)  # the CPU budget's; injectable for tests
        self._state = Lifecycle.DISABLED if disabled else Lifecycle.RUNNING
        self._shutdown_called = disabled
        #: One more in each forked child: a ticket of another generation (the parent's) is not counted here.
        #: A plain attribute: each ticket reads it when it is issued.
        self.generation = 0
        self._init_state()
        reinit_after_fork(self._at_fork_reinit)

    # --- state --------------------------------------------------------------------------------
    def _init_state(self) -> None:
        """(Re)create everything a forked child must not share: locks, queue, counters, thread."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queue: deque[Ticket] = deque()
        self._in_flight: dict[int, Ticket] = {}
        self._orphans: deque[DropReason] = deque()  # tickets collected open, not yet in the tally
        self._seq = 0
        self._tally = Tally()
        self._drop_log = DropLog(_LOG_INTERVAL_S)
        self._chain.reset()
        clock, cpu_clock, sleep = self._clocks
        self._throttle = (
            CpuThrottle(self._cpu_fraction, clock=clock, cpu_clock=cpu_clock, sleep=sleep)
            if self._cpu_fraction
            else None
        )
        if self._shutdown_called and self._state is not Lifecycle.DISABLED:
            self._state = Lifecycle.STOPPED  # a fork during shutdown: the child has nothing to finish
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._dispatcher: asyncio.Task[None] | None = None
        # The dispatcher waits for work: submit() wakes it (not a lifecycle state: it saves a
        # cross-thread wake-up per submit while the dispatcher is busy anyway).
        self._idle = False
        self._thread = threading.Thread(target=self._thread_main, name="ctxutil-evaluator", daemon=True)
        if self._state in (Lifecycle.RUNNING, Lifecycle.DRAINING):
            self._thread.start()

    def _at_fork_reinit(self) -> None:
        # The parent's thread and loop do not exist in the child; its queued work is the parent's.
        # Counters restart at zero, so the child's own accounting invariant holds. A process worker's
        # child is the parent's: this process starts its own when it first evaluates.
        self._judging.reset_after_fork()
        self.generation += 1
        self._init_state()

    # --- hot path -----------------------------------------------------------------------------
    def admit(
        self, trace_id: int, facts: SelectionFacts | None = None, lost: DropReason | None = None
    ) -> Ticket | Admission:
        unselected = self.unselected(trace_id, facts)
        with self._lock:
            self._tally.captured += 1
            if unselected == "capture_error":
                self._tally.count(("dropped", unselected))
                return refused(unselected)
            if unselected is not None:
                self._tally.count((unselected, None))
                return refused(unselected)
            if lost is not None:  # already lost: no rate-cap token, no look at the queue or the budget
                self._tally.count(("dropped", lost))
                return refused(lost)
            # Refuse now what submit() would refuse, so the capture path stops tracking it (a refused
            # interaction costs the request path no capture work).
            reason, _ = self._admission(at_capture=True)
            if reason is not None:
                suppressed = self._refuse(reason)
        if reason is None:
            return Ticket(self, trace_id=trace_id, facts=facts)
        self._drop_log.log(reason, suppressed)
        return refused(reason)

    def would_sample(self, trace_id: int, facts: SelectionFacts | None = None) -> bool:
        return self.unselected(trace_id, facts) is None

    def unselected(self, trace_id: int, facts: SelectionFacts | None = None) -> Unselected | None:
        """``None`` when the interaction is selected, else the outcome it would be counted in: the first
        selection rule matching ``facts`` decides (``not_selected``), with none the ``sample_rate`` does
        (``sampled_out``); ``capture_error`` when deciding raised (counted dropped). Without rules or
        facts: the trace-id ratio alone (the fast path)."""
        return self._chain.unselected(trace_id, facts)

    @property
    def selection(self) -> SelectionRules | None:
        """The selection rules, or ``None`` when none are configured."""
        return self._chain.selection

    # --- closing a ticket (Ticket.submit / drop / its collection) ----------------------------------
    def submit(self, ticket: Ticket, interaction: Interaction) -> bool | None:
        suppressed: int | None = None
        wake: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        with self._lock:
            if ticket._closed:
                return None
            ticket._closed = True
            if ticket._generation != self.generation:
                return False  # the parent's (admitted before a fork): counted there
            try:
                reason, reserved = self._admission(at_capture=False)
            except Exception:  # pragma: no cover - defensive: never raise into the application
                _log.exception("ctxutil evaluator: submit failed")
                reason, reserved = "internal_error", None
            if reason is None:
                self._seq += 1
                ticket.seq, ticket.interaction, ticket.reserved = self._seq, interaction, reserved
                self._queue.append(ticket)
                if self._idle and self._loop is not None and self._wake is not None:
                    self._idle = False
                    wake = (self._loop, self._wake)
            else:
                suppressed = self._refuse(reason)
        if reason is not None:
            self._drop_log.log(reason, suppressed)
            return False
        if wake is not None:
            call_soon(wake[0], wake[1].set)
        return True

    def drop(self, ticket: Ticket, reason: DropReason) -> bool:
        with self._lock:
            if ticket._closed:
                return False
            ticket._closed = True
            if ticket._generation == self.generation:
                self._tally.count(("dropped", reason))
        return True

    def collect(self, ticket: Ticket) -> bool:
        """Lock-free (a finalizer): count a ticket collected open; ``True`` when that is a bug to warn
        about (after shutdown it is one of the interactions shutdown left, counted ``shutdown``)."""
        if ticket._generation != self.generation:
            return False
        stopped = self._shutdown_called
        self._orphans.append("shutdown" if stopped else "internal_error")
        return not stopped

    def _fold_orphans(self) -> None:
        """Under the lock: count the tickets collected open since the last fold."""
        orphans = self._orphans
        while orphans:
            self._tally.count(("dropped", orphans.popleft()))

    def _admission(self, *, at_capture: bool) -> tuple[DropReason | None, float | None]:
        """Under the lock: ``(reason refused, None)`` or ``(None, judge tokens reserved)``.

        At capture the rate-cap token is taken (once per interaction) and the budget only looked at;
        at submit the rate cap is not asked again and the budget's tokens are reserved.
        """
        if self._state is not Lifecycle.RUNNING:
            return ("sdk_disabled" if self._state is Lifecycle.DISABLED else "shutdown"), None
        if len(self._queue) >= self._max_queue_size:
            return "queue_full", None  # at submit: the NEWEST is dropped, the queued work is older
        return self._chain.limits(at_capture=at_capture)

    def _refuse(self, reason: DropReason) -> int | None:
        """Under the lock: count a drop; returns what :meth:`DropLog.due` returns for its message."""
        self._tally.count(("dropped", reason))
        return self._drop_log.due(reason)

    # --- counters -----------------------------------------------------------------------------
    def stats(self) -> EvaluatorStats:
        throttled_s, throttled = (0.0, False) if self._throttle is None else self._throttle.throttled()
        with self._lock:
            self._fold_orphans()
            return self._tally.snapshot(
                in_flight=len(self._in_flight),
                queue_size=len(self._queue),
                cpu_throttled_s=throttled_s,
                cpu_throttled=throttled,
            )

    def outcomes(self) -> dict[tuple[str, str | None], int]:
        return self.stats().outcomes()

    def queue_size(self) -> int:
        return len(self._queue)

    def cpu_throttled_s(self) -> float:
        return 0.0 if self._throttle is None else self._throttle.throttled()[0]

    # --- worker thread ------------------------------------------------------------------------
    def _thread_main(self) -> None:
        run_loop(self._dispatch(), before_close=self._loop_closing)

    def _loop_closing(self) -> None:
        with self._lock:
            self._loop = None
        deadline = self._close_deadline
        self._judging.close(_CLOSE_TIMEOUT_S if deadline is None else deadline - time.monotonic())

    async def _dispatch(self) -> None:
        semaphore = asyncio.Semaphore(self._max_concurrency)
        tasks: set[asyncio.Task[None]] = set()
        wake = asyncio.Event()
        with self._lock:
            self._loop = asyncio.get_running_loop()
            self._wake = wake
            self._dispatcher = asyncio.current_task()
        throttle = self._throttle
        if throttle is not None:
            throttle.start()  # on this thread: its CPU clock is the one measured
        paid = False  # waited what the budget asked: start the next evaluation without asking again
        while True:
            await semaphore.acquire()
            # Asking again after the wait would find the bucket a little short every time (the wake-up
            # itself costs CPU) and wait again, for ever at low fractions: one wait buys one start.
            delay = 0.0 if throttle is None or paid else throttle.delay()
            paid = False
            entry: Ticket | None = None
            with self._lock:
                state = self._state
                if state is Lifecycle.STOPPED:
                    return
                queued = bool(self._queue)
                if queued and delay <= 0:
                    entry = self._queue.popleft()
                    self._in_flight[entry.seq] = entry
                    if throttle is not None:
                        throttle.started()
                elif not queued and state is Lifecycle.RUNNING:
                    self._idle = True
            if entry is None:
                semaphore.release()
                if queued and throttle is not None:  # CPU budget spent: the work waits in the queue
                    await throttle.wait(delay)  # shutdown cancels it
                    paid = True
                    continue
                if state is not Lifecycle.RUNNING:  # draining and nothing queued: finish, then end
                    await asyncio.gather(*tasks, return_exceptions=True)
                    return
                await wake.wait()
                wake.clear()
                continue
            self._start(entry, semaphore, tasks)
            if throttle is not None:
                await self._start_more(throttle, semaphore, tasks)

    async def _start_more(
        self, throttle: CpuThrottle, semaphore: asyncio.Semaphore, tasks: set[asyncio.Task[None]]
    ) -> None:
        """Once the budget allows a start, start as many as its burst covers (``CpuThrottle.starts``, each
        holding its expected CPU): one wake-up per batch rather than per evaluation, and a process worker
        sends the batch down its pipe at once."""
        for _ in range(throttle.starts() - 1):
            if semaphore.locked():
                return
            await semaphore.acquire()  # not locked: returns at once
            with self._lock:
                entry = (
                    self._queue.popleft() if self._queue and self._state is not Lifecycle.STOPPED else None
                )
                if entry is not None:
                    self._in_flight[entry.seq] = entry
                    throttle.started()
            if entry is None:
                semaphore.release()
                return
            self._start(entry, semaphore, tasks)

    # --- one started ticket: judged, the token budget settled, emitted, counted exactly once --------
    def _start(self, entry: Ticket, semaphore: asyncio.Semaphore, tasks: set[asyncio.Task[None]]) -> None:
        """On the loop: :meth:`_evaluate` ``entry`` as a task, held in ``tasks`` until it ends."""
        task = asyncio.ensure_future(self._evaluate(entry, semaphore))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def _evaluate(self, entry: Ticket, semaphore: asyncio.Semaphore) -> None:
        """Judge ``entry``, emit its result and count its outcome; then release ``semaphore`` and tell
        the CPU throttle, whatever happened (a cancellation counts ``dropped``/``shutdown``)."""
        try:
            await self._evaluate_entry(entry)
        except asyncio.CancelledError as exc:
            if _cancelled_by_us():
                self._finish(entry, ("dropped", "shutdown"))  # a no-op when shutdown already counted it
                raise
            self._failed_unexpectedly(entry, exc)  # a user object's own CancelledError
        except BaseException as exc:  # the accounting must still close, and the worker go on
            self._failed_unexpectedly(entry, exc)
        finally:
            semaphore.release()
            if self._throttle is not None:
                self._throttle.finished(running=len(self._in_flight))

    def _failed_unexpectedly(self, entry: Ticket, exc: BaseException) -> None:
        """An evaluation that raised: counted ``failed``/``internal_error``; the worker goes on (let out, a
        ``SystemExit`` stopped the loop for good). An ``Exception`` is a bug of ours (the judge's and the
        input's are caught where they run): logged with its traceback, for a report. Any other
        (``KeyboardInterrupt``, ``SystemExit``, a ``CancelledError`` not asked for: on this thread only a
        user's object or judge raises them) by its class and where it was raised, never its message."""
        if isinstance(exc, Exception):
            _log.error("ctxutil evaluator: unexpected error evaluating an interaction", exc_info=exc)
        else:
            _log.error(
                "ctxutil evaluator: evaluating an interaction raised %s (counted failed internal_error)",
                error_origin(exc),
            )
        self._finish(entry, ("failed", "internal_error"))

    async def _evaluate_entry(self, entry: Ticket) -> None:
        interaction = cast("Interaction", entry.interaction)  # set when it was queued
        start = time.perf_counter()
        judged = await self._judging.evaluate(interaction)
        if isinstance(judged, Rejection):  # not evaluable: dropped, nothing to emit
            self._chain.refund(entry.reserved)
            _log.debug("interaction %s not evaluable: %s", interaction.id, judged.message)
            self._finish(entry, ("dropped", judged.detail))
            return
        if isinstance(judged, Judged):  # timed where it ran (the process worker's child)
            result, duration_s = judged.result, judged.duration_s
        else:
            result, duration_s = judged, time.perf_counter() - start
        spent = None if result.usage is None else result.usage.total_tokens
        if spent is None and result.error_type is None:
            spent = 0  # a judge that reports no usage spent no tokens
        self._chain.settle(entry.reserved, spent)
        outcome = outcome_of(result)
        suppressed: int | None = None
        with self._lock:
            if entry.seq not in self._in_flight:
                return  # shutdown's deadline passed: already counted as dropped
            entry.outcome = outcome
            if outcome == ("failed", "invalid_input"):  # the application's input: tell its developer
                suppressed = self._drop_log.due(INVALID_INPUT)
        self._drop_log.log_invalid(result.explanation, suppressed)
        self._emit(interaction, result, duration_s)
        self._finish(entry, outcome)

    def _emit(self, interaction: Interaction, result: MetricEvaluationResult, duration_s: float) -> None:
        try:
            self._emitter.emit(interaction, result, duration_s)
        except Exception as exc:  # logged by class and place: a chunk's own object may quote the user's text
            with self._lock:
                self._tally.emit_errors += 1
                first = self._tally.emit_errors == 1
            message = "ctxutil evaluator: the emitter raised %s (logged once; counted in emit_errors)"
            (_log.error if first else _log.debug)(message, error_origin(exc))

    def _finish(self, entry: Ticket, outcome: OutcomeKey) -> None:
        with self._lock:
            if self._in_flight.pop(entry.seq, None) is None:
                return
            self._tally.count(outcome)
            self._cond.notify_all()

    # --- flush and shutdown -------------------------------------------------------------------
    def _flushed(self, target: int) -> bool:
        if self._queue and self._queue[0].seq <= target:
            return False
        return all(seq > target for seq in self._in_flight)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        if threading.current_thread() is self._thread:
            _log.warning("force_flush called from the evaluator's own thread: not waiting")
            return False
        deadline = time.monotonic() + max(0, timeout_millis) / 1000
        with self._cond:
            target = self._seq
            while not self._flushed(target):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def shutdown(self, timeout_millis: int = 30000) -> bool:
        deadline = time.monotonic() + max(0, timeout_millis) / 1000
        with self._lock:
            if self._shutdown_called:
                return True
            self._shutdown_called = True
            self._close_deadline = deadline
            self._state = Lifecycle.DRAINING  # from now on submit() drops with reason "shutdown"
            wake = (self._loop, self._wake) if self._idle else None
        if wake is not None and wake[0] is not None and wake[1] is not None:
            call_soon(wake[0], wake[1].set)  # an idle dispatcher sees the state and ends when drained
        own_thread = threading.current_thread() is self._thread
        flushed = False if own_thread else self.force_flush(int((deadline - time.monotonic()) * 1000))
        with self._lock:
            self._fold_orphans()
            left, refunds = self._tally.count_unfinished(self._queue, self._in_flight.values())
            self._queue.clear()
            self._in_flight.clear()
            self._state = Lifecycle.STOPPED
            self._cond.notify_all()
            loop, dispatcher = self._loop, self._dispatcher
        for reserved in refunds:
            self._chain.refund(reserved)
        if left:
            _log.warning(
                "ctxutil evaluator shut down with %d evaluations unfinished (dropped: shutdown)", left
            )
        if loop is not None and dispatcher is not None:
            call_soon(loop, dispatcher.cancel)
        if not own_thread and self._thread.is_alive():
            self._thread.join(max(0.0, deadline - time.monotonic()) + _JOIN_GRACE_S)
        return flushed and left == 0

    def close(self) -> None:
        """Finish what is queued, then end the thread (the Evaluator was garbage-collected): the
        ``DRAINING`` that ``shutdown()`` also starts from, without a deadline. Lock-free: this may run
        from a garbage-collection finalizer on any thread."""
        if self._state is Lifecycle.RUNNING:
            self._state = Lifecycle.DRAINING
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            call_soon(loop, wake.set)

    @property
    def is_shutdown(self) -> bool:
        return self._shutdown_called

    @property
    def thread(self) -> threading.Thread:
        return self._thread


def _cancelled_by_us() -> bool:
    """Whether the running task was cancelled (shutdown, a deadline) rather than handed a user object's own
    ``CancelledError``: the task's pending cancellation requests (Python 3.11+; before, every
    ``CancelledError`` counts as ours)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return cancelling is None or bool(cancelling())
