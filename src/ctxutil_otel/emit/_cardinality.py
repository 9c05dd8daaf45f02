"""Bounded metric dimensions: each value truncated, at most N distinct values per dimension per process.

Metric attributes become time series in the backend (one series per distinct combination), so a dimension
fed from user data (a tenant, a prompt version, a model name a gateway rewrites) must not grow without
bound. Each dimension keeps the first ``max_values`` distinct values it sees; later new values are reported
as :data:`OVERFLOW_VALUE` (the OpenTelemetry metrics SDK's own cardinality-limit convention is an overflow
series marked ``otel.metric.overflow=true``; a fixed value per attribute keeps the other dimensions of the
point intact), counted per dimension and warned once per dimension.

The cardinality budget: the number of series of one instrument is at most the product of
``max_values + 1`` over its dimensions (times the label/outcome values), so size ``max_values`` from the
budget your backend allows, e.g. 3 dimensions at 20 values: 21**3 = 9,261 series at most per label.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from .._fork import reinit_after_fork

__all__ = ["OVERFLOW_VALUE", "CardinalityLimiter"]

OVERFLOW_VALUE = "_other"
"""The value reported for a dimension's values beyond its budget."""

_log = logging.getLogger("ctxutil_otel.emit")


class CardinalityLimiter:
    """Truncates and bounds dimension values; safe to call from several threads.

    Args:
        max_values: Distinct values kept per dimension (>= 1); later ones become :data:`OVERFLOW_VALUE`.
        max_chars: Longest value kept, in characters (>= 1); longer values are cut (before counting, so
            values differing only past the cut are one value).

    Raises:
        ValueError: when a bound is below 1.
    """

    def __init__(self, *, max_values: int = 20, max_chars: int = 64) -> None:
        if max_values < 1 or max_chars < 1:
            raise ValueError(f"max_values and max_chars must be >= 1, got {max_values}, {max_chars}")
        self._max_values = max_values
        self._max_chars = max_chars
        self._seen: dict[str, set[str]] = {}
        self._overflowed: dict[str, int] = {}
        self._lock = threading.Lock()
        reinit_after_fork(self.reinit_after_fork)

    def bound(self, dimensions: Mapping[str, object]) -> dict[str, str]:
        """The dimensions as metric attributes: values as strings, truncated, overflowed past the budget.
        ``None`` values are left out."""
        out: dict[str, str] = {}
        with self._lock:
            for name, raw in dimensions.items():
                if raw is None:
                    continue
                value = str(raw)[: self._max_chars]
                seen = self._seen.setdefault(name, set())
                if value not in seen:
                    if len(seen) >= self._max_values:
                        count = self._overflowed.get(name, 0)
                        self._overflowed[name] = count + 1
                        if count == 0:
                            _log.warning(
                                "ctxutil: metric dimension %r has more than %d distinct values; later "
                                "ones are reported as %r (raise the limit or drop the dimension)",
                                name,
                                self._max_values,
                                OVERFLOW_VALUE,
                            )
                        value = OVERFLOW_VALUE
                    else:
                        seen.add(value)
                out[name] = value
        return out

    def overflowed(self) -> dict[str, int]:
        """Values reported as :data:`OVERFLOW_VALUE`, per dimension, since this limiter was made."""
        with self._lock:
            return dict(self._overflowed)

    def reinit_after_fork(self) -> None:
        """A fresh lock in a forked child (the parent's may have been held by another thread)."""
        self._lock = threading.Lock()
