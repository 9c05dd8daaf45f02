"""Fixtures for the emission tests: the real OpenTelemetry SDK with in-memory exporters and readers.

``telemetry`` and :class:`Telemetry` come from :mod:`tests.support.telemetry` (re-exported here for the
tests of this folder). ``make_interaction(...)`` builds the :class:`~ctxutil_otel.capture.Interaction` of a
dataset item.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from opentelemetry.trace import SpanContext

from ctxutil_otel import ContextualUtilization, DatasetItem, MetricEvaluationResult
from ctxutil_otel.capture import Interaction
from ctxutil_otel.judges import ChunkVerdict, JudgeResult, TokenUsage
from tests.support.telemetry import Telemetry
from tests.support.telemetry import telemetry as telemetry  # re-exported fixture

__all__ = ["Telemetry"]


class FixedJudge:
    """A real Judge whose verdicts the test dictates: one mark string per chunk ("RU", "R", "")."""

    name = "fixed"

    def __init__(
        self, marks: Sequence[str], usage: TokenUsage | None = None, model: str | None = None
    ) -> None:
        self.marks = list(marks)
        self.usage = usage
        self.model = model

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        verdicts = [
            ChunkVerdict(
                index=i,
                is_relevant="R" in self.marks[i],
                is_utilized="U" in self.marks[i],
                reason=f"verdict {self.marks[i] or '-'} on chunk {i}",
            )
            for i in range(len(chunks))
        ]
        return JudgeResult(verdicts=verdicts, usage=self.usage)


class FailingJudge:
    """A real Judge that fails the way a timed-out LLM judge does."""

    name = "failing"
    model: str | None = "judge-model-x"

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        from ctxutil_otel.judges import JudgeTimeoutError

        raise JudgeTimeoutError("judge did not answer within 5.0 s")


GREEN_TEA = DatasetItem(
    query="What are the benefits of green tea?",
    actual_output="Green tea is rich in antioxidants, which reduce inflammation.",
    retrieved_content=[
        "Green tea contains antioxidants called catechins.",
        "Antioxidants reduce inflammation in the body.",
        "Green tea may boost metabolism.",
        "Tea originated in China thousands of years ago.",
    ],
    id="item-green-tea",
)
GREEN_TEA_MARKS = ["RU", "RU", "R", ""]


def make_interaction(
    item: DatasetItem = GREEN_TEA, parent: SpanContext | None = None, **kwargs: Any
) -> Interaction:
    """The Interaction of ``item`` under ``parent`` (a ``SpanContext`` or ``None``); ``trace_id`` 0x1234,
    ``id`` "run-1" and the item's chunks as ``documents`` unless ``kwargs`` say otherwise (they are the other
    Interaction fields)."""
    fields: dict[str, Any] = {
        "trace_id": 0x1234,
        "id": "run-1",
        "documents": list(item.retrieved_content),
        **kwargs,
    }
    return Interaction(query=item.query, answer=item.actual_output, parent=parent, **fields)


def evaluate(
    item: DatasetItem,
    marks: Sequence[str],
    *,
    usage: TokenUsage | None = None,
    model: str | None = None,
    threshold: float = 0.5,
) -> MetricEvaluationResult:
    """Run the real metric with a :class:`FixedJudge`."""
    metric = ContextualUtilization(judge=FixedJudge(marks, usage=usage, model=model), threshold=threshold)
    return asyncio.run(metric.execute(item))


def evaluate_failing(item: DatasetItem) -> MetricEvaluationResult:
    """Run the real metric with a judge that times out (label ``error``, ``error_type`` ``timeout``)."""
    return asyncio.run(ContextualUtilization(judge=FailingJudge()).execute(item))
