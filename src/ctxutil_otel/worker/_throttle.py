"""The worker's CPU budget on its asyncio loop: wait before an evaluation while the budget is spent, and
account the seconds waited (``EvaluatorStats.cpu_throttled_s``).

Only the wait the budget asked for counts. The wait is an ``asyncio.sleep`` on the worker's loop, which
the evaluations share: one that blocks the loop (an emission through a synchronous span processor whose
exporter is slow, a judge that blocks) delays the wake-up past the wait's end. That delay is the blocking
call's, not the budget's: counted, a slow exporter read as 40 s of throttling where the budget had asked
for 0.37 s, and the figure told operators to raise a budget that was not the limit."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable

from ..sampling import CpuBudget
from ..sampling._thread_cpu import thread_time_less_full_collections

__all__ = ["CpuThrottle", "Sleep"]

Sleep = Callable[[float], Awaitable[object]]

#: At most this many evaluations start together after one wait (see :meth:`CpuThrottle.starts`).
MAX_STARTS = 32


class CpuThrottle(CpuBudget):
    """A :class:`~ctxutil_otel.sampling.CpuBudget` of ``fraction`` of one core for the worker thread that
    also times the waits it asks for.

    The dispatcher calls :meth:`start` once on the worker thread, :meth:`delay` before taking each
    queued interaction, and awaits :meth:`wait` when the delay is positive (the interaction stays
    queued meanwhile, so ``force_flush`` and ``shutdown`` see it and a cancelled wait loses nothing);
    :meth:`started` when it takes one (up to :meth:`starts` at once), and each evaluation calls
    :meth:`finished` at its end (all on the worker thread). :meth:`throttled` may be read from any thread.

    Args:
        fraction: Share of one core, in (0, 1].
        clock: Monotonic wall clock in seconds (also times the waits).
        cpu_clock: The worker thread's CPU clock in seconds (:func:`time.thread_time` less the full
            garbage collections run on it: ``sampling/_thread_cpu.py``).
        sleep: Awaitable wait of the given seconds (:func:`asyncio.sleep`); injectable for tests.
    """

    __slots__ = ("_asked", "_clock", "_since", "_sleep", "_wait_lock", "_waited")

    def __init__(
        self,
        fraction: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = thread_time_less_full_collections,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        super().__init__(fraction, clock=clock, cpu_clock=cpu_clock)
        self._clock = clock
        self._sleep = sleep
        self._wait_lock = threading.Lock()
        self._waited = 0.0
        self._since: float | None = None
        self._asked = 0.0

    def starts(self) -> int:
        """How many evaluations may start together once the budget allows one: as many as the burst
        (``burst_s``) covers at the expected CPU of each, rounded, at least 1 (always 1 while the cost is
        unknown), at most ``MAX_STARTS``. Each start still holds its expected CPU (:meth:`started`), so the
        pace is the same; only the wake-ups are fewer (one per batch rather than one per evaluation), and
        the worker runs ahead of its share by about the burst, as after an idle spell. Rounded rather than
        cut: the expected CPU includes each wake-up's own cost (cold caches after the wait), which a batch
        shares, so one start per wait would keep its estimate, and its batches, where they are."""
        expected = self.estimate()
        if expected <= 0:
            return 1
        return max(1, min(MAX_STARTS, round(self.burst_s / expected)))

    async def wait(self, seconds: float) -> None:
        """Wait ``seconds`` (cancellable: shutdown cancels it), counting the time waited: at most
        ``seconds``, however late the loop wakes the wait up (module docstring)."""
        since = self._clock()
        with self._wait_lock:
            self._since, self._asked = since, max(0.0, seconds)
        try:
            await self._sleep(seconds)
        finally:
            with self._wait_lock:
                self._waited += min(self._asked, max(0.0, self._clock() - since))
                self._since = None

    def throttled(self) -> tuple[float, bool]:
        """``(seconds waited in total, including a wait in progress; whether waiting now)``: a wait counts
        up to the seconds it asked for; past them the worker waits on something else (its loop is busy)."""
        with self._wait_lock:
            if self._since is None:
                return self._waited, False
            elapsed = max(0.0, self._clock() - self._since)
            return self._waited + min(self._asked, elapsed), elapsed < self._asked
