"""Throttled warnings for dropped interactions: at most one message per reason per interval, carrying
the number of drops not logged since (every drop is still counted by the engine).

As the OpenTelemetry SDK's batch processor does for dropped spans: under sustained overload a log line
per drop would itself be the overload.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["DropLog"]

_log = logging.getLogger("ctxutil_otel.worker")


class DropLog:
    """Decides which drops are logged; not thread-safe: :meth:`due` runs under the engine's lock and
    :meth:`log` outside it.

    Args:
        interval_s: Seconds between two messages for one reason (default 10).
        clock: Monotonic clock in seconds (default :func:`time.monotonic`).
    """

    __slots__ = ("_clock", "_interval_s", "_next", "_suppressed")

    def __init__(self, interval_s: float = 10.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._interval_s = interval_s
        self._clock = clock
        self._next: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def due(self, reason: str) -> int | None:
        """``None`` when a message for ``reason`` went out within the interval (this drop is only
        counted), else the number of drops not logged since the last message (the caller logs)."""
        now = self._clock()
        if now < self._next.get(reason, 0.0):
            self._suppressed[reason] = self._suppressed.get(reason, 0) + 1
            return None
        self._next[reason] = now + self._interval_s
        return self._suppressed.pop(reason, 0)

    @staticmethod
    def log(reason: str, suppressed: int | None) -> None:
        """Log one drop of ``reason`` when :meth:`due` said so (``suppressed`` not ``None``); a rate-cap
        refusal is INFO (working as configured), the others WARNING."""
        if suppressed is None:
            return
        level = logging.INFO if reason == "rate_limited" else logging.WARNING
        _log.log(
            level,
            "ctxutil evaluator dropped an interaction (reason %s; %d more since the last message)",
            reason,
            suppressed,
        )
