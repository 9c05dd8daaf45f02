"""``worker="process"``: the judge and the metric run in a child process; the application process only
converts the interaction, copies its strings down the pipe and emits the result that comes back.

Standard library only: a ``multiprocessing`` child started with the ``spawn`` method (a fresh interpreter:
no inherited locks, threads or OpenTelemetry providers) and one duplex ``Pipe``. Everything here runs on
the engine's worker thread and its asyncio loop, which reads the pipe (``loop.add_reader``): the CPU the
application process still spends per evaluation (conversion, pickling, emission) is the worker thread's,
which the CPU budget (``max_worker_cpu_fraction``) measures. This module is the facade the engine calls:
it sends evaluations, matches the answers and accounts for a lost child; the modules by side:

* this process: this facade; the child's lifecycle and the thread that writes down the pipe
  (``_process_child.py``); starting it without the main module (``_no_main.py``);
* the pipe: its messages, what may go down it and the cut of long texts (``_pipe.py``);
* the child: its spawn target (``_child_entry.py``), the child itself (``_child.py``); the judge's key,
  resolved here and scrubbed from the child's environment there (``_child_env.py``).

Contract, the same as the thread worker's (the engine's accounting is unchanged):

* bounded on both sides: the engine's queue in this process; in the child at most ``max_concurrency``
  evaluations (the engine's semaphore), so the pipe holds at most that many interactions;
* per-evaluation timeout: the child's own (``evaluation_timeout_s``, failed ``timeout``); a child that does
  not answer within that plus a grace (its loop is blocked) is killed: that evaluation fails ``timeout``, the
  others in flight ``worker_crashed``;
* a child that dies (crash, ``kill -9``, out of memory) fails its in-flight evaluations with
  ``error.type`` ``worker_crashed``; the next evaluation starts a new child, after a back-off when it keeps
  dying (a child that cannot build its judge);
* fork safety: a forked application process forgets the parent's child (never uses or stops it, and
  removes it from ``multiprocessing``'s own list so its exit does not terminate it) and starts its own
  when it first evaluates;
* the child starts lazily, at the first evaluation, off the request path;
* this loop never blocks on the pipe: it pickles, and a sender thread writes (``_process_child.py``), so
  the timer that kills a hung child fires even when the child stopped reading a full pipe;
* the child ends by itself when this process dies (``_child.py``'s watchdog); it is not on
  ``multiprocessing``'s list of children (``_process_child.py``): ``close`` stops it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import time
from multiprocessing.context import ForkServerContext, SpawnContext
from typing import Any

from .._interaction import Interaction
from .._item import DatasetItem
from .._poll import wait_readable
from .._settings import Settings
from ..metric._contextual_utilization import METRIC_NAME, ContextualUtilization
from ..metric._results import MetricEvaluationResult
from ._child_env import settings_for_child
from ._convert import MetricInfo, Rejection, to_strings
from ._evaluate import convert
from ._pipe import ChildConfig, cap_texts, check_reaches_child, decode_result, note_cut
from ._process_child import Child, detach, forget, kill, launch, new_child, stop, unwatch, watch
from ._types import Judged

__all__ = ["ChildProcessJudging"]

_log = logging.getLogger("ctxutil_otel.worker")

#: How long a new child may take to import and build its judge before it counts as crashed.
STARTUP_TIMEOUT_S = 120.0
#: Wait before restarting after the n-th consecutive crash (the last value repeats).
BACKOFF_S = (0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
_EXPIRED = "expired"  # the future's value when the backstop fired (an answer is a tuple: never this)

#: What an evaluation's future resolves to: ``(JSON, seconds)`` from the child, ``_EXPIRED``, or ``None``
#: (the child was lost).
_Outcome = tuple[str, float] | str | None


class ChildProcessJudging:
    """The engine's :class:`~ctxutil_otel.worker._types.Judging` for ``worker="process"`` (module docstring).

    Args:
        settings: Sent to the child, which builds the judge and the metric from them (the API key,
            ``OPENAI_API_KEY``'s included, travels through the pipe; the child removes
            ``CTXUTIL_JUDGE_API_KEY`` and ``OPENAI_API_KEY`` from the environment it inherits).
        metric: A metric to run instead (pickled to the child).
        timeout_s: The per-evaluation timeout (``evaluation_timeout_s``).
        max_in_flight: The child's bound (``max_concurrency``).
        start_method: ``"spawn"`` (default) or ``"forkserver"``.

    Raises:
        SettingsError: ``OPENAI_API_KEY``, read for the openai judge, holds whitespace.
        TypeError: ``metric`` cannot reach the child: it cannot be pickled, or it uses a class or function
            of a ``__main__`` the child does not import (``python -c``, a REPL; see ``_pipe.py``).
    """

    def __init__(
        self,
        *,
        settings: Settings,
        metric: ContextualUtilization | None,
        timeout_s: float,
        max_in_flight: int,
        start_method: str = "spawn",
    ) -> None:
        if metric is not None:
            check_reaches_child(metric)
            info = MetricInfo.of(metric)
        else:
            info = MetricInfo(METRIC_NAME, settings.threshold, settings.judge, settings.judge_model)
        self._context: SpawnContext | ForkServerContext = multiprocessing.get_context(start_method)  # type: ignore[assignment]  # spawn or forkserver
        self._start_method = start_method
        # The key goes down the pipe; the child drops it from the environment it inherits (_child_env.py).
        self._config = ChildConfig(settings_for_child(settings), metric, timeout_s, max_in_flight)
        self._info = info
        # The child times out by itself; this only catches a child whose loop no longer runs.
        self._backstop_s = timeout_s + max(1.0, timeout_s / 4)
        self._init_state()

    def _init_state(self) -> None:
        self._child: Child | None = None
        self._pending: dict[int, tuple[asyncio.Future[_Outcome], Child]] = {}
        self._seq = 0
        self._crashes = 0
        self._restart_at = 0.0
        self._startup_failure: str | None = None  # logged already
        self.started = 0  # children started (tests and the benchmark read it)

    @property
    def pid(self) -> int | None:
        """The running child's process id, or ``None``."""
        child = self._child
        return None if child is None else child.process.pid

    # --- evaluation (the worker thread's loop) -----------------------------------------------------
    async def evaluate(self, interaction: Interaction) -> Judged | MetricEvaluationResult | Rejection:
        strings = to_strings(interaction)  # the child validates: no DatasetItem built here
        if strings is None:  # not str query or answer (rare): validated here, never pickled as is
            converted = convert(interaction, self._info)
            if not isinstance(converted, DatasetItem):
                return converted
            strings = converted.query, converted.actual_output, converted.retrieved_content
        elif isinstance(strings, Rejection):
            if strings.outcome == "dropped":
                return strings
            return self._info.failure_of(interaction, strings.detail, strings.message)
        strings, cut = cap_texts(*strings)  # bounded before it is pickled (``_pipe.py``)
        child = await self._ready_child()
        if child is None:
            return self._crashed(interaction)
        self._seq += 1
        seq = self._seq
        future: asyncio.Future[_Outcome] = child.loop.create_future()
        self._pending[seq] = (future, child)
        # A timer rather than asyncio.wait_for: no extra task per evaluation.
        backstop = child.loop.call_later(self._backstop_s, self._expire, seq, child)
        if not child.outgoing:  # the first of this loop turn: send them all at its end, in one message
            child.loop.call_soon(self._send, child)
            if not child.reading and wait_readable(child.conn.fileno(), 0.0):
                self._read(child)  # the wake-up that starts evaluations also reads the results waiting
        child.outgoing.append((seq, *strings, interaction.id))
        try:
            answer = await future
        finally:
            backstop.cancel()
            self._pending.pop(seq, None)
        if answer is None:
            return self._crashed(interaction)
        if isinstance(answer, str):  # _EXPIRED
            return self._info.failure_of(
                interaction, "timeout", f"Evaluation timed out after {self._config.timeout_s:g} s."
            )
        raw, duration_s = answer
        result = decode_result(raw, strings[2])
        note_cut(result, cut)
        return Judged(result, duration_s)

    def _send(self, child: Child) -> None:
        batch, child.outgoing = child.outgoing, []
        if child.lost or not batch or child.sender is None:
            return  # their futures are resolved already (worker_crashed)
        child.sender.send(("evaluate", batch))  # never blocks this loop (a hung child stops reading)
        self._unwatch(child)

    def _unwatch(self, child: Child) -> None:
        unwatch(child, full=len(self._pending) >= self._config.max_in_flight)

    def _expire(self, seq: int, child: Child) -> None:
        """The child did not answer ``seq`` in time (its loop is blocked): that one times out, the child
        is killed (what else it had in flight fails ``worker_crashed``)."""
        waiting = self._pending.pop(seq, None)
        if waiting is not None and not waiting[0].done():
            waiting[0].set_result(_EXPIRED)
            self._lost(child, unresponsive=True)

    def _crashed(self, interaction: Interaction) -> MetricEvaluationResult:
        return self._info.failure_of(interaction, "worker_crashed", "The evaluation child process ended.")

    async def _ready_child(self) -> Child | None:
        """The running child, started if need be; ``None`` when it died before saying hello."""
        child = self._child
        while child is None:
            delay = self._restart_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)  # shutdown cancels it
            child = self._child or self._start()
        if not child.ready.done():
            child.starting += 1
            try:
                await asyncio.wait_for(asyncio.shield(child.ready), STARTUP_TIMEOUT_S)
            except asyncio.TimeoutError:
                self._lost(child, unresponsive=True)
            finally:
                child.starting -= 1
        return child if child.ready.result() and not child.lost else None  # lost since its hello

    def _start(self) -> Child:
        child, child_conn = new_child(self._context, asyncio.get_running_loop(), self._read)
        self._child = child
        self.started += 1
        launch(child, child_conn, start_method=self._start_method, config=self._config, on_lost=self._lost)
        return child

    def _read(self, child: Child) -> None:
        """Read every message waiting; then keep watching the pipe only when nothing is in flight."""
        fd = child.conn.fileno()
        try:
            while True:
                self._on_message(child, child.conn.recv())
                if child.lost or not wait_readable(fd, 0.0):
                    break
        except Exception:  # EOF (the child died), a broken pipe or message
            self._lost(child)
            return
        if child.lost:
            return
        if self._pending:
            self._unwatch(child)
        else:
            watch(child)

    def _on_message(self, child: Child, message: Any) -> None:
        if message[0] == "hello":
            self._info = message[1]  # the child's MetricInfo
            if not child.ready.done():
                child.ready.set_result(True)
            return
        if message[0] == "failed":  # it cannot start (it exits next): reported in _lost
            child.failure = message[1]
            return
        self._crashes = 0  # it works: the next crash restarts at once
        self._startup_failure = None
        pending = self._pending
        for seq, raw, duration_s in message[1]:  # ("results", [Answer, ...])
            waiting = pending.pop(seq, None)
            if waiting is not None and not waiting[0].done():
                waiting[0].set_result((raw, duration_s))

    def _lost(self, child: Child, *, unresponsive: bool = False) -> None:
        """The child died or stopped answering: kill it, fail what it had in flight, restart later."""
        if not detach(child):
            return
        killed = kill(child, unresponsive=unresponsive)
        # Evaluations still waiting in _ready_child fail worker_crashed too, also when the child said hello
        # before it was lost (they have not resumed yet): it logged "0 evaluations failed" for 5 failed.
        starting = child.starting
        if not child.ready.done():
            child.ready.set_result(False)
        failed = 0
        for seq, (future, owner) in list(self._pending.items()):
            if owner is child:
                del self._pending[seq]
                if not future.done():
                    future.set_result(None)
                    failed += 1
        if self._child is child:
            self._child = None
        self._restart_at = time.monotonic() + BACKOFF_S[min(self._crashes, len(BACKOFF_S) - 1)]
        self._crashes += 1
        self._report_loss(child, killed=killed, unresponsive=unresponsive, failed=failed + starting)

    def _report_loss(self, child: Child, *, killed: bool, unresponsive: bool, failed: int) -> None:
        """Log what happened to ``child`` and what was failed ``worker_crashed`` (the one timed out past
        the backstop is counted ``timeout``, not here); a child that cannot start logs its reason once."""
        process = child.process
        how = (
            "stopped answering and was killed"
            if unresponsive
            else "was killed after its pipe closed"
            if killed
            else "ended"
        )
        started = child.ready.done() and child.ready.result() if child.failure is None else False
        if not started and not unresponsive:
            reason = child.failure or f"it ended before it was ready (exit code {process.exitcode})"
            if reason != self._startup_failure:
                self._startup_failure = reason
                _log.error(
                    "ctxutil evaluator: the evaluation child process could not start: %s; %d evaluations "
                    "failed (worker_crashed); it is tried again after a back-off (up to %g s; logged "
                    "once while the reason stays the same)",
                    reason,
                    failed,
                    BACKOFF_S[-1],
                )
                return
        _log.log(
            logging.DEBUG if not started and not unresponsive else logging.WARNING,
            "ctxutil evaluator: the evaluation child process %s %s (exit code %s); %d evaluations failed "
            "(worker_crashed); a new child starts with the next evaluation",
            process.pid,
            how,
            process.exitcode,
            failed,
        )

    # --- end and fork ------------------------------------------------------------------------------
    def close(self, timeout_s: float) -> None:
        """Ask the child to stop, wait up to ``timeout_s`` seconds, then kill it (worker thread, at the
        end)."""
        child, self._child = self._child, None
        if child is not None and detach(child):
            stop(child, timeout_s)

    def reset_after_fork(self) -> None:
        """In a forked application process: the child is the parent's. Close our copy of the pipe and
        take it off ``multiprocessing``'s list of children (whose exit hook would terminate it)."""
        child = self._child
        if child is not None:
            forget(child.process)
            with contextlib.suppress(Exception):
                child.conn.close()
        self._init_state()
