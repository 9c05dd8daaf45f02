"""The retrieval half of a result: ``contextual_relevancy`` = relevant / distinct retrieved chunks, read from
the verdicts the utilization judgement already made (no judge call of its own; docs/slices.md).

When it is emitted (decided): for every result that is not an error and judged at least one chunk, i.e.
whenever ``signals.relevancy_score`` is set; that includes ``not_applicable`` results whose chunks were all
judged irrelevant (relevancy 0.0: exactly the retrieval problem the reading is for). Not for errors (no
verdicts) nor for interactions that retrieved nothing (no denominator).
"""

from __future__ import annotations

import math

from opentelemetry.util.types import AttributeValue

from ..metric._results import MetricEvaluationResult
from ._names import (
    ATTR_EVALUATION_EXPLANATION,
    ATTR_EVALUATION_NAME,
    ATTR_EVALUATION_SCORE_VALUE,
    ATTR_JUDGE_MODEL,
    ATTR_JUDGE_NAME,
    ATTR_TOTAL_CHUNKS,
    ATTR_TOTAL_RELEVANT_CHUNKS,
    EVALUATION_CONTEXTUAL_RELEVANCY,
)

__all__ = ["relevancy_attributes", "relevancy_of"]

# What the relevancy event shares with the utilization result's attributes (the rest, score label,
# utilization fields, threshold and judge tokens, belongs to the utilization result only).
_SHARED = (ATTR_TOTAL_RELEVANT_CHUNKS, ATTR_TOTAL_CHUNKS, ATTR_JUDGE_NAME, ATTR_JUDGE_MODEL)


def relevancy_of(result: MetricEvaluationResult) -> float | None:
    """The result's contextual relevancy in [0, 1], or ``None`` when it is not emitted (module docstring).

    Raises:
        ValueError: for a relevancy that is not a finite number in [0, 1] (a malformed result).
    """
    if result.label == "error":
        return None
    relevancy = result.signals.relevancy_score
    if relevancy is None or result.signals.distinct_chunks <= 0:
        return None
    value = float(relevancy)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"relevancy_score out of [0, 1]: {relevancy!r}")
    return value


def relevancy_attributes(
    relevancy: float,
    result: MetricEvaluationResult,
    common: dict[str, AttributeValue],
    context: dict[str, AttributeValue],
) -> dict[str, AttributeValue]:
    """The ``gen_ai.evaluation.result`` event of the relevancy: its name, score and explanation, the chunk
    counts and judge of ``common`` (the utilization result's attributes), and ``context`` (interaction,
    application, dimensions and sender)."""
    signals = result.signals
    attributes: dict[str, AttributeValue] = {k: common[k] for k in _SHARED if k in common}
    attributes.update(context)
    attributes[ATTR_EVALUATION_NAME] = EVALUATION_CONTEXTUAL_RELEVANCY
    attributes[ATTR_EVALUATION_SCORE_VALUE] = relevancy
    attributes[ATTR_EVALUATION_EXPLANATION] = (
        f"{int(signals.total_relevant_chunks)} of {int(signals.distinct_chunks)} distinct retrieved chunks "
        "judged relevant to the query."
    )
    return attributes
