"""A judge token budget per minute, charged with the tokens evaluations actually spent."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ._bucket import Refill

__all__ = ["TokenBudget"]

_EWMA_ALPHA = 0.2


class TokenBudget:
    """Limits judge tokens (input + output) spent per minute.

    An evaluation's cost is known only after the judge answered, so the budget is a token bucket
    that may go into debt: it holds at most ``tokens_per_minute`` and refills continuously at
    ``tokens_per_minute / 60`` tokens per second.

    * :meth:`reserve` (at admission) refuses while the level is at or below zero; otherwise it
      charges an estimate of one evaluation's cost (an exponentially weighted mean, alpha 0.2, of
      the reported costs; 0 until the first report) and returns it.
    * :meth:`settle` (after the evaluation) charges the difference between the tokens actually
      spent and the reservation; ``actual=None`` (cost unknown, e.g. a timeout) keeps the estimate.
    * :meth:`refund` returns a reservation that was never spent (dropped before evaluation).

    Overshoot is therefore bounded by the evaluations admitted while the level was still positive
    (at most queue size + concurrency), and repaid from later refills; the debt is at most one minute's
    budget (``-tokens_per_minute``), so no single report stops evaluation for longer than a minute.

    Args:
        tokens_per_minute: Budget in tokens per minute (> 0).
        clock: Monotonic clock in seconds; injectable for tests (default :func:`time.monotonic`).

    Raises:
        ValueError: if ``tokens_per_minute`` <= 0.

    Thread-safe: one lock guards the level and the estimate.
    """

    __slots__ = ("_bucket", "_estimate", "_lock", "_spent")

    def __init__(self, tokens_per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(tokens_per_minute, bool) or not tokens_per_minute > 0:
            raise ValueError(f"tokens_per_minute must be > 0, got {tokens_per_minute!r}")
        self._bucket = Refill(tokens_per_minute / 60.0, tokens_per_minute, clock=clock)
        self._lock = threading.Lock()
        self._estimate: float | None = None
        self._spent = 0

    @property
    def tokens_per_minute(self) -> int:
        return int(self._bucket.capacity)

    @property
    def spent(self) -> int:
        """Tokens reported spent since construction."""
        return self._spent

    def reserve(self) -> float | None:
        """Admit one evaluation: ``None`` when the budget is spent, else the tokens reserved."""
        with self._lock:
            if self._bucket.advance() <= 0:
                return None
            reserved = self._estimate or 0.0
            self._bucket.level -= reserved
            return reserved

    def settle(self, reserved: float, actual: int | None) -> None:
        """Charge an admitted evaluation's real cost ``actual`` (tokens) against its reservation."""
        with self._lock:
            if actual is None:
                return
            # Debt is at most one minute's budget: one report, however large, stops evaluation for at
            # most a minute (replies reporting more than MAX_REPORTED_TOKENS never get here).
            bucket = self._bucket
            bucket.level = max(-bucket.capacity, bucket.level - (actual - reserved))
            self._spent += actual
            self._estimate = (
                float(actual)
                if self._estimate is None
                else self._estimate + _EWMA_ALPHA * (actual - self._estimate)
            )

    def refund(self, reserved: float) -> None:
        """Give back the reservation of an evaluation that never ran."""
        with self._lock:
            bucket = self._bucket
            bucket.level = min(bucket.capacity, bucket.level + reserved)

    def level(self) -> float:
        """Tokens available now (negative while in debt)."""
        with self._lock:
            return self._bucket.advance()
