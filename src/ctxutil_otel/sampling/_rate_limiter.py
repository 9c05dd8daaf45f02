"""A thread-safe token-bucket rate limiter (evaluations per second)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ._bucket import Refill

__all__ = ["TokenBucket"]


class TokenBucket:
    """The classic token bucket: ``rate`` tokens per second accrue up to ``burst``; each admitted
    event takes one token (or ``n``), and an event finding too few tokens is refused.

    The bucket starts full, so up to ``burst`` events pass at once, and over any window of ``t``
    seconds at most ``burst + rate * t`` events pass.

    Args:
        rate: Tokens added per second (> 0).
        burst: Capacity in tokens (>= 1); defaults to ``max(1, rate)``, one second's worth.
        clock: Monotonic clock in seconds; injectable for tests (default :func:`time.monotonic`).

    Raises:
        ValueError: if ``rate`` <= 0 or ``burst`` < 1.

    Thread-safe: one lock guards the level.
    """

    __slots__ = ("_bucket", "_lock")

    def __init__(
        self, rate: float, *, burst: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be > 0 tokens per second, got {rate!r}")
        burst = max(1.0, float(rate)) if burst is None else float(burst)
        if not burst >= 1:
            raise ValueError(f"burst must be >= 1 token, got {burst!r}")
        self._bucket = Refill(rate, burst, clock=clock)
        self._lock = threading.Lock()

    @property
    def rate(self) -> float:
        """Tokens per second."""
        return self._bucket.rate

    @property
    def burst(self) -> float:
        """Capacity in tokens."""
        return self._bucket.capacity

    def try_acquire(self, n: float = 1.0) -> bool:
        """Take ``n`` tokens if available; never blocks. Returns ``True`` when taken."""
        with self._lock:
            bucket = self._bucket
            if bucket.advance() >= n:
                bucket.level -= n
                return True
            return False

    def available(self) -> float:
        """Tokens available now (for diagnostics)."""
        with self._lock:
            return self._bucket.peek()
