"""Sampling and admission: which interactions the worker evaluates.

* :class:`TraceIdRatioSampler`: deterministic share of traces (OpenTelemetry's TraceIdRatioBased rule).
* :class:`TokenBucket`: a rate cap in evaluations per second.
* :class:`TokenBudget`: a judge token budget per minute, charged with the tokens actually spent.
"""

from __future__ import annotations

from ._rate_limiter import TokenBucket
from ._sampler import TraceIdRatioSampler
from ._token_budget import TokenBudget

__all__ = ["TokenBucket", "TokenBudget", "TraceIdRatioSampler"]
