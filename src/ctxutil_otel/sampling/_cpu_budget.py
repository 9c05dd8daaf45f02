"""A CPU budget for the evaluation worker: a token bucket of CPU-seconds (a share of one core)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from ._bucket import Refill
from ._thread_cpu import thread_time_less_full_collections

__all__ = ["DEFAULT_CPU_BURST_S", "CpuBudget"]

#: CPU-seconds the bucket holds at most: how much work may run back to back after an idle spell. 5 ms is
#: CPython's default GIL switch interval (``sys.getswitchinterval()``): after an idle spell the worker
#: runs ahead of its share by about one slice, so the application's threads, which share the GIL with
#: it, never meet a long burst of its work (20 ms cost the chain measurably more: benchmarks/README.md).
DEFAULT_CPU_BURST_S = 0.005
# A debt this small (1 ns of CPU) is rounding, not work: waiting it out could spin on a clock whose
# resolution is coarser than the wait.
_EPSILON_S = 1e-9
# Finished units over which the CPU per unit is averaged (the CPU clock read at the last 17 finishes).
_WINDOW = 16


class CpuBudget:
    """Paces one thread to ``fraction`` of one CPU core, measured on its own CPU clock.

    A token bucket of CPU-seconds: it holds at most ``burst_s`` and refills at ``fraction`` CPU-seconds
    per wall-clock second, and is charged with the CPU time the thread actually spent (read from
    ``cpu_clock``: by default :func:`time.thread_time`, so only that thread's CPU counts, less the full
    garbage collections that ran on it, which walk the whole process's heap: ``_thread_cpu.py``). Before
    starting a unit of work the thread asks :meth:`delay`: ``0`` while the level is at or above zero,
    otherwise the wall seconds until the refill brings it back to zero (``-level / fraction``), which
    the caller waits, then starts the unit without asking again (asking again would find the level a
    little short, by the CPU of waking up, and at small fractions wait for ever).

    Work that has started is charged only as it runs, so an idle thread would start as many units as
    it may run concurrently before any of their CPU showed: a burst, not a pace. Hence :meth:`started`
    holds each unit's expected CPU at once (the mean CPU per finished unit over the last 16: the CPU
    clock between :meth:`finished` calls; twice the burst until two have finished), and the CPU
    spent later uses the hold up before it is charged again; :meth:`finished` gives back what the
    units still running cannot use (more than the expected CPU of each), so in total the bucket is
    charged exactly the CPU spent, only earlier.

    Over a long run the thread's CPU is at most ``burst_s + fraction * wall_seconds`` plus the CPU of
    the work in flight, plus the CPU of the first two units beyond the burst (a cold start: imports,
    connections; forgiven rather than stalling the thread for seconds; later units are paced in full).
    Charging is the net CPU since the previous reading against the refill over the same interval
    (capped at ``burst_s``), so asking more often never changes the pace.

    Args:
        fraction: Share of one core, in (0, 1]: CPU-seconds per wall second.
        burst_s: Capacity in CPU-seconds (> 0); default 0.005 (5 ms, see ``DEFAULT_CPU_BURST_S``).
        clock: Monotonic wall clock in seconds (default :func:`time.monotonic`); injectable for tests.
        cpu_clock: CPU clock of the paced thread in seconds (default: :func:`time.thread_time` less the
            full garbage collections run on that thread); injectable for tests. It is read on the thread
            that calls the methods.

    Raises:
        ValueError: if ``fraction`` is not in (0, 1] or ``burst_s`` is not > 0.

    Not thread-safe: one thread (the worker's) owns it.
    """

    __slots__ = ("_bucket", "_cold", "_cpu", "_cpu_clock", "_finishes", "_held")

    def __init__(
        self,
        fraction: float,
        *,
        burst_s: float = DEFAULT_CPU_BURST_S,
        clock: Callable[[], float] = time.monotonic,
        cpu_clock: Callable[[], float] = thread_time_less_full_collections,
    ) -> None:
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ValueError(f"fraction must be a share of one core in (0, 1], got {fraction!r}")
        if not burst_s > 0:
            raise ValueError(f"burst_s must be > 0 CPU-seconds, got {burst_s!r}")
        self._bucket = Refill(fraction, burst_s, clock=clock)
        self._cpu_clock = cpu_clock
        self._finishes: deque[float] = deque(maxlen=_WINDOW + 1)
        self._held = 0.0
        self._cold = False  # a unit started and fewer than two have finished (see _update)
        self._cpu = cpu_clock()

    @property
    def fraction(self) -> float:
        """Share of one core (CPU-seconds per wall second)."""
        return self._bucket.rate

    @property
    def burst_s(self) -> float:
        """Capacity in CPU-seconds."""
        return self._bucket.capacity

    def start(self) -> None:
        """Start measuring from now, on the calling thread (the one to pace), with a full bucket, no
        hold and no estimate. Call it first on that thread: its CPU clock is per thread."""
        self._bucket.reset()
        self._held = 0.0
        self._cold = False
        self._finishes.clear()
        self._cpu = self._cpu_clock()

    def delay(self) -> float:
        """Charge the CPU spent since the previous reading, refill for the wall time passed, and return
        the seconds to wait before the next unit of work may start (``0.0``: start now)."""
        self._update()
        level = self._bucket.level
        return 0.0 if level >= -_EPSILON_S else -level / self._bucket.rate

    def started(self) -> None:
        """A unit of work starts (right after :meth:`delay` said so, or after waiting what it said): hold
        its expected CPU. Before two units have finished their cost is unknown: hold twice the burst, so
        that no second unit starts until this one finishes (which gives the hold back) or the refill has
        paid for it; otherwise a thread starting up would start as many units at once as it may run."""
        if len(self._finishes) >= 2:
            expected = self.estimate()
        else:
            expected, self._cold = 2 * self._bucket.capacity, True
        self._bucket.level -= expected
        self._held += expected

    def finished(self, running: int) -> None:
        """A unit of work finished, ``running`` others still run: charge the CPU spent so far, feed the
        estimate, and give back the hold beyond the expected CPU of those still running."""
        self._update()
        self._finishes.append(self._cpu)
        excess = self._held - self.estimate() * max(0, running)
        if excess > 0:
            self._held -= excess
            bucket = self._bucket
            bucket.level = min(bucket.capacity, bucket.level + excess)

    def estimate(self) -> float:
        """Expected CPU-seconds of one unit: the mean over the last finished ones (0.0 before two)."""
        finishes = self._finishes
        if len(finishes) < 2:
            return 0.0
        return max(0.0, finishes[-1] - finishes[0]) / (len(finishes) - 1)

    def level(self) -> float:
        """CPU-seconds available as of the last reading (negative while in debt; holds included)."""
        return self._bucket.level

    def _update(self) -> None:
        now, cpu = self._bucket.clock(), self._cpu_clock()
        spent = max(0.0, cpu - self._cpu)
        self._cpu = cpu
        covered = min(spent, self._held)  # already charged when its unit started
        self._held -= covered
        floor = None
        if self._cold and len(self._finishes) < 2:
            # Cold start: until two units have finished, debt beyond the burst is forgiven. A first
            # call importing its client library and opening connections (~300 ms) would otherwise
            # stall the thread for seconds; from then on every unit is paced in full. (Holds for units
            # still running are not debt yet: the bound is on what was spent.)
            floor = -self._bucket.capacity - self._held
        self._bucket.advance(now, charge=spent - covered, floor=floor)

    def __repr__(self) -> str:
        return f"CpuBudget(fraction={self._bucket.rate}, burst_s={self._bucket.capacity})"
