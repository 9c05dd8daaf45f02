"""Throttled logging: at most one message per key per interval, carrying how many were not logged since.

As the OpenTelemetry SDK's batch processor does for dropped spans: under sustained overload a log line
per event would itself be the overload. Used by the evaluator's drop warnings and the receiver's
refusal warnings (every event is still counted by its owner).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["ThrottledLog"]


class ThrottledLog:
    """Decides which events of each key are logged; not thread-safe (the owner calls :meth:`due` under
    its lock and logs outside it).

    Args:
        interval_s: Seconds between two messages for one key.
        clock: Monotonic clock in seconds (default :func:`time.monotonic`).
    """

    __slots__ = ("_clock", "_interval_s", "_next", "_suppressed")

    def __init__(self, interval_s: float = 10.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._next: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def due(self, key: str) -> int | None:
        """``None`` when a message for ``key`` went out within the interval (this event is only
        counted), else the number of events of ``key`` not logged since the last message (the caller
        logs this one and mentions them)."""
        now = self._clock()
        if now < self._next.get(key, 0.0):
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return None
        self._next[key] = now + self._interval_s
        return self._suppressed.pop(key, 0)
