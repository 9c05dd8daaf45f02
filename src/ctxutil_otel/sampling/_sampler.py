"""Deterministic trace-id ratio sampling, the rule of OpenTelemetry's ``TraceIdRatioBased``.

Source: opentelemetry-python, ``opentelemetry.sdk.trace.sampling.TraceIdRatioBased`` (and the
OpenTelemetry specification's TraceIdRatioBased sampler): a trace is sampled when the low-order 64
bits of its trace id are below ``round(rate * 2**64)``. The decision depends on the trace id only,
so every process agrees on it, and the traces sampled at a lower rate are a subset of those sampled
at any higher rate (10% is a subset of 20%).
"""

from __future__ import annotations

__all__ = ["TraceIdRatioSampler"]

_TRACE_ID_LIMIT = (1 << 64) - 1


class TraceIdRatioSampler:
    """Samples a share ``rate`` of trace ids, deterministically.

    Args:
        rate: Share of traces to sample, in [0, 1]. 0 samples nothing; 1 samples every trace id.

    Raises:
        ValueError: if ``rate`` is not a number in [0, 1].
    """

    __slots__ = ("_bound", "_rate")

    def __init__(self, rate: float) -> None:
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate <= 1.0:
            raise ValueError(f"sample rate must be a number in [0, 1], got {rate!r}")
        self._rate = float(rate)
        self._bound = self.bound_for_rate(self._rate)

    @staticmethod
    def bound_for_rate(rate: float) -> int:
        """The exclusive upper bound for the low 64 bits of a sampled trace id: ``round(rate * 2**64)``."""
        return round(rate * (_TRACE_ID_LIMIT + 1))

    @property
    def rate(self) -> float:
        """The configured share, in [0, 1]."""
        return self._rate

    @property
    def bound(self) -> int:
        """See :meth:`bound_for_rate`."""
        return self._bound

    def should_sample(self, trace_id: int) -> bool:
        """``True`` when ``trace_id`` (the 128-bit OpenTelemetry trace id as an ``int``) is sampled."""
        return trace_id & _TRACE_ID_LIMIT < self._bound

    def __repr__(self) -> str:
        return f"TraceIdRatioSampler(rate={self._rate})"
