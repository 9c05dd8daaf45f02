"""A CPU budget for the evaluation worker: token buckets of CPU-seconds (a share of one core)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

__all__ = ["DEFAULT_CPU_BURST_S", "CpuBudget"]

#: CPU-seconds a bucket holds at most: how much work may run back to back after an idle spell.
DEFAULT_CPU_BURST_S = 0.02
# A debt this small (1 ns of CPU) is rounding, not work: waiting it out could spin on a clock whose
# resolution is coarser than the wait.
_EPSILON_S = 1e-9
# Finished units over which the CPU per unit is averaged (the CPU clock read at the last 17 finishes).
_WINDOW = 16


class CpuBudget:
    """Paces one thread to ``fraction`` of one CPU core, measured on its own CPU clock.

    Two token buckets of CPU-seconds, each holding at most ``burst_s`` and refilled at ``fraction``
    CPU-seconds per wall-clock second:

    * the *spent* bucket is charged with the CPU time the thread actually spent (read from
      ``cpu_clock``, :func:`time.thread_time` by default, so only that thread's CPU counts): the
      guarantee, whatever each unit of work costs;
    * the *started* bucket is charged, by :meth:`started`, with the expected CPU of each unit as it
      starts: the mean CPU per finished unit over the last 16 (the CPU clock between the
      :meth:`finished` calls; 0 until two have finished). Work that has started is charged on the
      spent bucket only as it runs, so without this one an idle worker would start as many units as
      it may run concurrently before any of their CPU showed, a burst instead of a pace.

    Before starting a unit the thread asks :meth:`delay`: ``0`` while both levels are at or above
    zero, otherwise the wall seconds until the refill brings the lower one back to zero
    (``-level / fraction``), which the caller waits before asking again.

    Over a long run the thread's CPU is at most ``burst_s + fraction * wall_seconds`` plus the CPU of
    the work in flight: a share of one core. Charging is the net CPU since the previous call against
    the refill over the same interval (capped at ``burst_s``), so calling :meth:`delay` more often
    never changes the pace.

    Args:
        fraction: Share of one core, in (0, 1]: CPU-seconds per wall second.
        burst_s: Capacity of each bucket in CPU-seconds (> 0); default 0.02 (20 ms).
        clock: Monotonic wall clock in seconds (default :func:`time.monotonic`); injectable for tests.
        cpu_clock: CPU clock of the paced thread in seconds (default :func:`time.thread_time`);
            injectable for tests. It is read on the thread that calls the methods.

    Raises:
        ValueError: if ``fraction`` is not in (0, 1] or ``burst_s`` is not > 0.

    Not thread-safe: one thread (the worker's) owns it.
    """

    __slots__ = (
        "_burst",
        "_clock",
        "_cpu",
        "_cpu_clock",
        "_expected",
        "_finishes",
        "_fraction",
        "_last",
        "_level",
    )

    def __init__(
        self,
        fraction: float,
        burst_s: float = DEFAULT_CPU_BURST_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = time.thread_time,
    ) -> None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ValueError(f"fraction must be a share of one core in (0, 1], got {fraction!r}")
        if not burst_s > 0:
            raise ValueError(f"burst_s must be > 0 CPU-seconds, got {burst_s!r}")
        self._fraction = float(fraction)
        self._burst = float(burst_s)
        self._clock = clock
        self._cpu_clock = cpu_clock
        self._finishes: deque[float] = deque(maxlen=_WINDOW + 1)
        self._level = self._expected = self._burst
        self._last = clock()
        self._cpu = cpu_clock()

    @property
    def fraction(self) -> float:
        """Share of one core (CPU-seconds per wall second)."""
        return self._fraction

    @property
    def burst_s(self) -> float:
        """Capacity of each bucket in CPU-seconds."""
        return self._burst

    def start(self) -> None:
        """Start measuring from now, on the calling thread (the one to pace), with full buckets and no
        estimate. Call it first on that thread: :func:`time.thread_time` is per thread."""
        self._level = self._expected = self._burst
        self._finishes.clear()
        self._last = self._clock()
        self._cpu = self._cpu_clock()

    def delay(self) -> float:
        """Charge the CPU spent since the previous call, refill for the wall time passed, and return
        the seconds to wait before the next unit of work may start (``0.0``: start now)."""
        now, cpu = self._clock(), self._cpu_clock()
        refill = max(0.0, now - self._last) * self._fraction
        spent = max(0.0, cpu - self._cpu)
        self._last, self._cpu = now, cpu
        self._level = min(self._burst, self._level + refill - spent)
        self._expected = min(self._burst, self._expected + refill)
        debt = -min(self._level, self._expected)
        return 0.0 if debt <= _EPSILON_S else debt / self._fraction

    def started(self) -> None:
        """A unit of work starts (right after :meth:`delay` said so): charge its expected CPU."""
        self._expected -= self.estimate()

    def finished(self) -> None:
        """A unit of work finished: the CPU clock now feeds the estimate (call it on the paced thread)."""
        self._finishes.append(self._cpu_clock())

    def estimate(self) -> float:
        """Expected CPU-seconds of one unit: the mean over the last finished ones (0.0 before two)."""
        finishes = self._finishes
        if len(finishes) < 2:
            return 0.0
        return max(0.0, finishes[-1] - finishes[0]) / (len(finishes) - 1)

    def level(self) -> float:
        """CPU-seconds available as of the last :meth:`delay`: the lower of the two buckets' levels
        (negative while in debt)."""
        return min(self._level, self._expected)

    def __repr__(self) -> str:
        return f"CpuBudget(fraction={self._fraction}, burst_s={self._burst})"
