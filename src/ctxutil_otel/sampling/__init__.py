"""Sampling and admission: which interactions the worker evaluates.

* :class:`TraceIdRatioSampler`: deterministic share of traces (OpenTelemetry's TraceIdRatioBased rule).
* :class:`TokenBucket`: a rate cap in evaluations per second.
* :class:`TokenBudget`: a judge token budget per minute, charged with the tokens actually spent.
* :class:`CpuBudget`: the worker thread's CPU share of one core (CPU-seconds per wall second).
"""

from __future__ import annotations

from ._cpu_budget import CpuBudget
from ._rate_limiter import TokenBucket
from ._sampler import TraceIdRatioSampler
from ._token_budget import TokenBudget

__all__ = ["CpuBudget", "TokenBucket", "TokenBudget", "TraceIdRatioSampler"]
