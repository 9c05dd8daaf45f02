"""The evaluator's observable instruments (outcome counts, queue size, CPU-budget waits), read from
callables at collection time, nothing on the request path. Behind ``Emitter.observe``."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.util.types import AttributeValue

from ._attributes import ErrorCallback, count, outcome_observations
from ._names import ATTR_APPLICATION_NAME, METRIC_EVALUATIONS, METRIC_QUEUE_SIZE, METRIC_WORKER_CPU_THROTTLED

__all__ = ["ObservableInstruments", "OutcomeCounts"]

OutcomeCounts = Mapping[tuple[str, "str | None"], int]
"""``{(outcome, detail): cumulative count}``; ``detail`` is the ``error.type`` of ``failed``, the
``reason`` of ``dropped``, else ``None``."""


class ObservableInstruments:
    """``ctxutil.evaluations``, ``ctxutil.queue.size`` and ``ctxutil.worker.cpu_throttled`` on ``meter``.

    The instruments are created on the first :meth:`observe`; later calls only replace the sources. Each
    callback reads its source, reports a failing or invalid one to ``on_error`` (keyed by the metric's name)
    and then reports nothing for that instrument; the other instruments are unaffected.
    """

    def __init__(self, meter: Meter, application_name: str | None, on_error: ErrorCallback) -> None:
        self._meter = meter
        self._application_name = application_name
        self._on_error = on_error
        self._lock = threading.Lock()
        self._registered = False
        self._outcomes: Callable[[], OutcomeCounts] | None = None
        self._queue_size: Callable[[], int] | None = None
        self._cpu_throttled_s: Callable[[], float] | None = None

    def new_lock(self) -> None:
        """A fresh lock (in a forked child; see :mod:`ctxutil_otel._fork`)."""
        self._lock = threading.Lock()

    def observe(
        self,
        outcomes: Callable[[], OutcomeCounts],
        queue_size: Callable[[], int],
        cpu_throttled_s: Callable[[], float] | None = None,
    ) -> None:
        """Set the sources (see :meth:`ctxutil_otel.emit.Emitter.observe`); register the instruments once."""
        with self._lock:
            self._outcomes = outcomes
            self._queue_size = queue_size
            self._cpu_throttled_s = cpu_throttled_s
            if self._registered:
                return
            self._registered = True
        self._meter.create_observable_counter(
            METRIC_EVALUATIONS,
            callbacks=[self._observe_outcomes],
            unit="{evaluation}",
            description="Captured interactions by final outcome (sampled_out, dropped, evaluated, "
            "not_applicable, failed).",
        )
        self._meter.create_observable_gauge(
            METRIC_QUEUE_SIZE,
            callbacks=[self._observe_queue_size],
            unit="{interaction}",
            description="Interactions waiting for evaluation.",
        )
        self._meter.create_observable_counter(
            METRIC_WORKER_CPU_THROTTLED,
            callbacks=[self._observe_cpu_throttled],
            unit="s",
            description="Wall-clock seconds the evaluation worker waited, with interactions queued, because "
            "its CPU budget (max_worker_cpu_fraction) was spent.",
        )

    def _common(self) -> dict[str, AttributeValue] | None:
        return {ATTR_APPLICATION_NAME: self._application_name} if self._application_name else None

    def _observe_outcomes(self, options: CallbackOptions) -> Iterable[Observation]:
        source = self._outcomes
        if source is None:
            return []
        try:
            counts = dict(source())
        except Exception as exc:
            self._on_error(METRIC_EVALUATIONS, exc)
            return []
        return [
            Observation(n, attributes)
            for attributes, n in outcome_observations(counts, self._application_name, self._on_error)
        ]

    def _observe_queue_size(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe_one(METRIC_QUEUE_SIZE, self._queue_size, count)

    def _observe_cpu_throttled(self, options: CallbackOptions) -> Iterable[Observation]:
        return self._observe_one(METRIC_WORKER_CPU_THROTTLED, self._cpu_throttled_s, _seconds)

    def _observe_one(
        self, name: str, source: Callable[[], object] | None, convert: Callable[[object], float]
    ) -> list[Observation]:
        """One observation of ``convert(source())``; none when unset or when either fails (reported)."""
        if source is None:
            return []
        try:
            value = convert(source())
        except Exception as exc:
            self._on_error(name, exc)
            return []
        return [Observation(value, self._common())]


def _seconds(value: object) -> float:
    """``value`` as finite, non-negative seconds (an ``int`` or ``float``, not ``bool``); ``ValueError``
    otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected seconds as a float, got {value!r}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"expected finite, non-negative seconds, got {value!r}")
    return seconds
