"""ctxutil-otel: live Contextual Utilization monitoring for RAG applications on OpenTelemetry.

The data flow (DESIGN.md): capture -> sample -> queue -> worker -> judge -> metric -> emit.
"""

from __future__ import annotations

from ._item import DatasetItem
from .judges import ChunkVerdict, Judge, JudgeResult, LexicalJudge, TokenUsage
from .metric import (
    ChunkBreakdown,
    ContextualUtilization,
    ContextualUtilizationResult,
    EvaluationMode,
    MetricEvaluationResult,
    MetricRunner,
)

__version__ = "0.1.0"

__all__ = [
    "ChunkBreakdown",
    "ChunkVerdict",
    "ContextualUtilization",
    "ContextualUtilizationResult",
    "DatasetItem",
    "EvaluationMode",
    "Judge",
    "JudgeResult",
    "LexicalJudge",
    "MetricEvaluationResult",
    "MetricRunner",
    "TokenUsage",
    "__version__",
]
