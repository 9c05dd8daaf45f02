"""Scoring: the Contextual Utilization metric, its results, and a batch runner."""

from __future__ import annotations

from ._contextual_utilization import ContextualUtilization, EvaluationMode, validate_verdicts
from ._results import (
    ChunkBreakdown,
    ChunkResult,
    ContextualUtilizationResult,
    Label,
    MetricEvaluationResult,
)
from ._runner import MetricRunner

__all__ = [
    "ChunkBreakdown",
    "ChunkResult",
    "ContextualUtilization",
    "ContextualUtilizationResult",
    "EvaluationMode",
    "Label",
    "MetricEvaluationResult",
    "MetricRunner",
    "validate_verdicts",
]
