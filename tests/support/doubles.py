"""Test doubles shared by every test folder: a hand-driven clock and a recording emitter.

Both stand where no real part can be steered: time (a test advances :class:`FakeClock` instead of
sleeping) and the hand-over from the worker to the emitter (:class:`RecordingEmitter` keeps what the
evaluator gives it; the real :class:`~ctxutil_otel.emit.Emitter` has its own tests in tests/emit/ and is
used end to end in tests/worker/test_with_real_emitter.py, tests/capture/test_otel.py and tests/serve/).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, get_value

from ctxutil_otel.metric import MetricEvaluationResult

__all__ = ["FakeClock", "RecordingEmitter"]


class FakeClock:
    """A monotonic clock in seconds that only moves when the test says so: ``clock()`` reads it,
    ``clock.advance(s)`` moves it, ``clock.now`` may also be set directly."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingEmitter:
    """Implements the emitter contract (``emit`` / ``observe``) and records what it is handed.

    Args:
        fail: When true, every ``emit`` records and then raises ``RuntimeError`` (a broken emitter).

    Attributes:
        emitted: ``(interaction, result, duration_s)`` per ``emit`` call, in call order.
        suppressed_during_emit: The OpenTelemetry suppress-instrumentation flag seen during each call.
        outcomes, queue_size, cpu_throttled_s: The callbacks handed to ``observe`` (``None`` before it).
    """

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.lock = threading.Lock()
        self.emitted: list[tuple[Any, MetricEvaluationResult, float]] = []
        self.suppressed_during_emit: list[object] = []
        self.outcomes: Callable[[], Mapping[Any, int]] | None = None
        self.queue_size: Callable[[], int] | None = None
        self.cpu_throttled_s: Callable[[], float] | None = None

    def emit(self, interaction: Any, result: MetricEvaluationResult, duration_s: float) -> None:
        with self.lock:
            self.emitted.append((interaction, result, duration_s))
            self.suppressed_during_emit.append(get_value(_SUPPRESS_INSTRUMENTATION_KEY))
        if self.fail:
            raise RuntimeError("emitter is broken")

    def observe(
        self,
        outcomes: Callable[[], Mapping[Any, int]],
        queue_size: Callable[[], int],
        cpu_throttled_s: Callable[[], float] | None = None,
    ) -> None:
        self.outcomes = outcomes
        self.queue_size = queue_size
        self.cpu_throttled_s = cpu_throttled_s

    @property
    def interactions(self) -> list[Any]:
        """The interactions emitted so far, in order."""
        with self.lock:
            return [interaction for interaction, _, _ in self.emitted]

    def labels(self) -> list[str]:
        """The result labels emitted so far (``pass``, ``fail``, ``not_applicable``, ``error``), in order."""
        with self.lock:
            return [result.label for _, result, _ in self.emitted]
