"""The one refill rule behind every budget of the sampling room: a level that refills continuously at
``rate`` per second up to ``capacity``, charged as it is used.

``TokenBucket`` (evaluations per second), ``TokenBudget`` (judge tokens per minute, may go into debt)
and ``CpuBudget`` (CPU-seconds per wall second) differ in what they charge and when, not in how they refill.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Refill"]


class Refill:
    """A level refilling at ``rate`` units per second of ``clock``, capped at ``capacity``; starts full.

    Not thread-safe: the owner serialises calls (its lock, or its one thread).

    Args:
        rate: Units added per second (> 0; the owner validates it).
        capacity: Level at most.
        clock: Monotonic clock in seconds (default :func:`time.monotonic`).
    """

    __slots__ = ("capacity", "clock", "last", "level", "rate")

    def __init__(self, rate: float, capacity: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = float(rate)
        self.capacity = float(capacity)
        self.clock = clock
        self.level = self.capacity
        self.last = clock()

    def advance(self, now: float | None = None, *, charge: float = 0.0, floor: float | None = None) -> float:
        """Refill for the time since the last call (none if the clock went back) and charge ``charge``
        units net of it (so reading more often never changes the pace); the level stays at or above
        ``floor`` when given and at or below ``capacity``. Returns the new level."""
        now = self.clock() if now is None else now
        elapsed = now - self.last
        self.last = now
        level = self.level + max(0.0, elapsed) * self.rate - charge
        if floor is not None:
            level = max(level, floor)
        self.level = min(self.capacity, level)
        return self.level

    def peek(self) -> float:
        """The level the next :meth:`advance` without charge would give, without advancing."""
        return min(self.capacity, self.level + max(0.0, self.clock() - self.last) * self.rate)

    def reset(self) -> None:
        """Full, from now."""
        self.level = self.capacity
        self.last = self.clock()
