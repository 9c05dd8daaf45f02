"""Bounded metric dimensions: each value truncated, at most N distinct values per dimension per process.

Metric attributes become time series in the backend (one series per distinct combination), so a dimension
fed from user data (a tenant, a prompt version, a model name a gateway rewrites) must not grow without
bound. Each dimension keeps the first ``max_values`` distinct values it sees; later new values are reported
as :data:`OVERFLOW_VALUE` (``_OTHER``; the OpenTelemetry metrics SDK's own cardinality-limit convention is
an overflow series marked ``otel.metric.overflow=true``; a fixed value per attribute keeps the other
dimensions of the point intact), counted per dimension (:meth:`CardinalityLimiter.overflowed`, and
``on_overflow`` for the ``ctxutil.dimension.overflow`` counter) and warned once per dimension.

One limiter bounds both the evaluation dimensions (:meth:`~CardinalityLimiter.bound`) and the evaluated
service's identity (:meth:`~CardinalityLimiter.bound_group`: name, namespace and environment count as one
value of the dimension ``ctxutil.evaluated.service.name``).

Values are made safe for every exporter first (:func:`clean_value`): a lone surrogate (what ``json.loads``
makes of a broken ``\\ud800`` escape in user metadata) becomes U+FFFD, since prometheus_client's
``generate_latest`` raises ``UnicodeEncodeError`` on it and loses the whole page for good (counters are
cumulative); a control character (``\\n``, ``\\x00``, any ``Cc``) becomes a space. Strings are then cut to
``max_chars``; a number (or other non-string) whose text is longer is reported as :data:`OVERFLOW_VALUE`
and counted like an overflow, never cut into a different number.

The cardinality budget: the number of series of one instrument is at most the product of
``max_values + 1`` over its dimensions (times the label/outcome values); docs/slices.md sizes it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Mapping

from opentelemetry.util.types import AttributeValue

from .._dimension_keys import is_no_number
from .._fork import reinit_after_fork
from ._names import DIMENSION_OTHER

__all__ = ["OVERFLOW_VALUE", "CardinalityLimiter"]

OVERFLOW_VALUE = DIMENSION_OTHER
"""The value reported for a dimension's values beyond its budget (``_OTHER``)."""

_log = logging.getLogger("ctxutil_otel.emit")

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_value(value: str) -> str:
    """``value`` with each control character (Unicode category ``Cc``) replaced by a space and each lone
    surrogate by U+FFFD, so that it encodes as UTF-8 and stays on one line."""
    if value.isprintable():  # the common case: no Cc, no surrogate (both are not printable)
        return value
    return _SURROGATE.sub("\ufffd", _CONTROL.sub(" ", value))


class CardinalityLimiter:
    """Truncates and bounds dimension values; safe to call from several threads.

    Args:
        max_values: Distinct values kept per dimension (>= 1); later ones become :data:`OVERFLOW_VALUE`.
        max_chars: Longest value kept, in characters (>= 1); longer strings are cut (before counting, so
            values differing only past the cut are one value); a longer non-string (a number's text) is
            reported as :data:`OVERFLOW_VALUE` and counted as an overflow.
        on_overflow: Called (outside the lock, never raising into the caller) with a dimension's name and
            a count: ``0`` the first time the dimension is seen (so that a counter of overflows starts at
            0 and ``rate()`` sees its first overflow), then ``1`` each time a value is reported as
            :data:`OVERFLOW_VALUE`.

    Raises:
        ValueError: when a bound is below 1.
    """

    def __init__(
        self,
        *,
        max_values: int = 100,
        max_chars: int = 64,
        on_overflow: Callable[[str, int], None] | None = None,
    ) -> None:
        if max_values < 1 or max_chars < 1:
            raise ValueError(f"max_values and max_chars must be >= 1, got {max_values}, {max_chars}")
        self.max_values = max_values
        self.max_chars = max_chars
        self._on_overflow = on_overflow
        self._seen: dict[str, set[object]] = {}
        self._overflowed: dict[str, int] = {}
        self._lock = threading.Lock()
        reinit_after_fork(self.reinit_after_fork)

    def bound(self, dimensions: Mapping[str, object] | None) -> dict[str, str]:
        """The dimensions as metric attributes: values as cleaned strings (:func:`clean_value`), cut,
        overflowed past the budget (a non-string too long to keep whole is :data:`OVERFLOW_VALUE`).
        ``None``, empty values and NaN or infinite numbers are left out."""
        if not dimensions:
            return {}
        out: dict[str, str] = {}
        overflowed: list[tuple[str, int]] = []
        max_chars = self.max_chars
        with self._lock:
            for name, raw in dimensions.items():
                if raw is None or is_no_number(raw):
                    continue
                text = clean_value(str(raw))
                if len(text) > max_chars and not isinstance(raw, str):
                    self._refuse(name, overflowed, "its text is longer than dimension_max_chars")
                    out[name] = OVERFLOW_VALUE
                    continue
                value = text[:max_chars]
                if not value:
                    continue
                if self._admit(name, value, overflowed):
                    out[name] = value
                else:
                    out[name] = OVERFLOW_VALUE
        self._report(overflowed)
        return out

    def bound_group(self, name: str, attributes: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
        """``attributes`` (string values cleaned and cut to ``max_chars``, like :meth:`bound`'s) while their
        combination is one of the first ``max_values`` seen for dimension ``name`` (or was seen before),
        else ``{name: _OTHER}`` (counted as an overflow of ``name``). ``{}`` stays ``{}``."""
        if not attributes:
            return attributes
        attributes = {
            k: clean_value(v)[: self.max_chars] if isinstance(v, str) else v for k, v in attributes.items()
        }
        identity = tuple(sorted((k, str(v)) for k, v in attributes.items()))
        reports: list[tuple[str, int]] = []
        with self._lock:
            admitted = self._admit(name, identity, reports)
        self._report(reports)
        return attributes if admitted else {name: OVERFLOW_VALUE}

    def overflowed(self) -> dict[str, int]:
        """Values reported as :data:`OVERFLOW_VALUE`, per dimension, since this limiter was made."""
        with self._lock:
            return dict(self._overflowed)

    def reinit_after_fork(self) -> None:
        """A fresh lock in a forked child (the parent's may have been held by another thread)."""
        self._lock = threading.Lock()

    # --- internals --------------------------------------------------------------------------------
    def _admit(self, name: str, value: object, reports: list[tuple[str, int]]) -> bool:
        """Lock held: whether ``value`` is (now) one of dimension ``name``'s kept values; counts a
        refusal and warns on the first one of the dimension; appends what to report to ``reports``."""
        seen = self._seen.get(name)
        if seen is None:
            seen = self._seen[name] = set()
            reports.append((name, 0))
        if value in seen:
            return True
        if len(seen) < self.max_values:
            seen.add(value)
            return True
        self._refuse(
            name, reports, f"it has more than {self.max_values} distinct values (dimension_max_values)"
        )
        return False

    def _refuse(self, name: str, reports: list[tuple[str, int]], why: str) -> None:
        """Lock held: counts a value of ``name`` reported as :data:`OVERFLOW_VALUE`, warns on the first."""
        if name not in self._seen:
            self._seen[name] = set()
            reports.append((name, 0))
        count = self._overflowed.get(name, 0)
        self._overflowed[name] = count + 1
        reports.append((name, 1))
        if count == 0:
            _log.warning(
                "ctxutil: a value of metric dimension %r is reported as %r because %s; such values are "
                "counted in ctxutil.dimension.overflow (raise the limit, or drop the dimension from "
                "metric_dimensions: docs/slices.md)",
                name,
                OVERFLOW_VALUE,
                why,
            )

    def _report(self, reports: list[tuple[str, int]]) -> None:
        callback = self._on_overflow
        if callback is None or not reports:
            return
        for name, n in reports:
            try:
                callback(name, n)
            except Exception:  # a failing counter must not lose the point
                _log.debug("ctxutil: counting a dimension overflow failed", exc_info=True)
