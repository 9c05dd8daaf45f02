"""ctxutil-otel: live Contextual Utilization monitoring for RAG applications on OpenTelemetry.

The data flow (DESIGN.md): capture -> sample -> queue -> worker -> judge -> metric -> emit.

* Capture: :class:`UtilizationCallbackHandler` (LangChain; :class:`CtxutilInstrumentor` attaches it to every
  run) or :class:`UtilizationSpanProcessor` (spans from OpenInference / OpenTelemetry GenAI / OpenLLMetry
  instrumentation).
* Worker: :class:`Evaluator` (sampling, bounded queue, background evaluation, accounting).
* Judges and metric: :class:`SemanticJudge` (offline default with the ``semantic`` extra),
  :class:`LearnedJudge` (offline default without it), :class:`LexicalJudge`, :class:`OpenAIJudge`,
  :class:`ContextualUtilization`.
* Emission: :class:`Emitter`, :func:`configure_telemetry`.

Capture classes and :class:`OpenAIJudge` are imported on first use (they pull in LangChain or the
OpenAI SDK).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._item import DatasetItem
from ._lazy import lazy_attributes
from ._settings import Settings, SettingsError
from .judges import ChunkVerdict, Judge, JudgeError, JudgeResult, LearnedJudge, LexicalJudge, TokenUsage
from .metric import (
    ChunkBreakdown,
    ContextualUtilization,
    ContextualUtilizationResult,
    EvaluationMode,
    MetricEvaluationResult,
    MetricRunner,
)

if TYPE_CHECKING:
    from .capture._instrumentor import CtxutilInstrumentor
    from .capture._langchain import UtilizationCallbackHandler
    from .capture.spans import UtilizationSpanProcessor
    from .emit import Emitter, configure_telemetry
    from .judges._openai import OpenAIJudge
    from .judges._semantic import SemanticJudge
    from .worker import Evaluator, EvaluatorStats

__version__ = "0.1.0"

__all__ = [
    "ChunkBreakdown",
    "ChunkVerdict",
    "ContextualUtilization",
    "ContextualUtilizationResult",
    "CtxutilInstrumentor",
    "DatasetItem",
    "Emitter",
    "EvaluationMode",
    "Evaluator",
    "EvaluatorStats",
    "Judge",
    "JudgeError",
    "JudgeResult",
    "LearnedJudge",
    "LexicalJudge",
    "MetricEvaluationResult",
    "MetricRunner",
    "OpenAIJudge",
    "SemanticJudge",
    "Settings",
    "SettingsError",
    "TokenUsage",
    "UtilizationCallbackHandler",
    "UtilizationSpanProcessor",
    "__version__",
    "configure_telemetry",
]

_LAZY = {
    "CtxutilInstrumentor": ".capture._instrumentor",
    "UtilizationCallbackHandler": ".capture._langchain",
    "UtilizationSpanProcessor": ".capture.spans",
    "Emitter": ".emit",
    "configure_telemetry": ".emit",
    "OpenAIJudge": ".judges._openai",
    "SemanticJudge": ".judges._semantic",
    "Evaluator": ".worker",
    "EvaluatorStats": ".worker",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
