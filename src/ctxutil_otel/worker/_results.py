"""What happens to one admitted interaction once the engine's dispatcher (``_engine.py``) starts it: judged
through the :class:`~ctxutil_otel.worker._types.Judging`, the judge-token budget settled (or refunded for
a rejection), the result emitted, and its outcome counted exactly once.

Exactly-once: the entry sits in ``in_flight`` (the engine's, shared) while it runs; whoever removes it from
there under the lock counts its outcome (:meth:`ResultHandler.evaluate` here, or the engine's ``shutdown``
at its deadline), never twice.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import cast

from .._accounting import OutcomeKey
from .._interaction import Interaction
from ..metric._results import MetricEvaluationResult
from ._admission import AdmissionChain
from ._convert import Rejection
from ._tally import Tally
from ._throttle import CpuThrottle
from ._ticket import Ticket
from ._types import EvaluationEmitter, Judged, Judging, outcome_of

__all__ = ["ResultHandler"]

_log = logging.getLogger("ctxutil_otel.worker")


class ResultHandler:
    """Not public: the engine makes one with each state it (re)creates (at construction and after a
    fork), sharing its lock, condition, ``in_flight`` map, tally and CPU throttle."""

    def __init__(
        self,
        *,
        judging: Judging,
        emitter: EvaluationEmitter,
        chain: AdmissionChain,
        lock: threading.Lock,
        cond: threading.Condition,
        in_flight: dict[int, Ticket],
        tally: Tally,
        throttle: CpuThrottle | None,
    ) -> None:
        self._judging = judging
        self._emitter = emitter
        self._chain = chain
        self._lock = lock
        self._cond = cond
        self._in_flight = in_flight
        self._tally = tally
        self._throttle = throttle

    def start(self, entry: Ticket, semaphore: asyncio.Semaphore, tasks: set[asyncio.Task[None]]) -> None:
        """On the engine's loop: :meth:`evaluate` ``entry`` as a task, held in ``tasks`` until it ends."""
        task = asyncio.ensure_future(self.evaluate(entry, semaphore))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    async def evaluate(self, entry: Ticket, semaphore: asyncio.Semaphore) -> None:
        """Judge ``entry``, emit its result and count its outcome; then release ``semaphore`` and tell
        the CPU throttle, whatever happened (a cancellation counts ``dropped``/``shutdown``)."""
        try:
            await self._evaluate_entry(entry)
        except asyncio.CancelledError:
            self._finish(entry, ("dropped", "shutdown"))  # a no-op when shutdown already counted it
            raise
        except Exception:  # pragma: no cover - defensive: the accounting must still close
            _log.exception("ctxutil evaluator: unexpected error evaluating an interaction")
            self._finish(entry, ("failed", "internal_error"))
        finally:
            semaphore.release()
            if self._throttle is not None:
                self._throttle.finished(running=len(self._in_flight))

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
        with self._lock:
            if entry.seq not in self._in_flight:
                return  # shutdown's deadline passed: already counted as dropped
            entry.outcome = outcome
        self._emit(interaction, result, duration_s)
        self._finish(entry, outcome)

    def _emit(self, interaction: Interaction, result: MetricEvaluationResult, duration_s: float) -> None:
        try:
            self._emitter.emit(interaction, result, duration_s)
        except Exception:
            with self._lock:
                self._tally.emit_errors += 1
                first = self._tally.emit_errors == 1
            if first:
                _log.exception("ctxutil evaluator: the emitter raised (logged once; counted in emit_errors)")
            else:
                _log.debug("ctxutil evaluator: the emitter raised", exc_info=True)

    def _finish(self, entry: Ticket, outcome: OutcomeKey) -> None:
        with self._lock:
            if self._in_flight.pop(entry.seq, None) is None:
                return
            self._tally.count(outcome)
            self._cond.notify_all()
