"""The emitter's synchronous instruments, recorded once per evaluation result (beside the observable ones in
``_observables``): the score histogram (utilization and relevancy points), the chunk counters, the
duration histogram, the judge token counter and the dimension overflow counter."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.metrics import Meter
from opentelemetry.util.types import AttributeValue

from ..metric._results import MetricEvaluationResult
from ._attributes import ErrorCallback, count, finite
from ._names import (
    ATTR_DIMENSION_NAME,
    ATTR_EVALUATION_NAME,
    ATTR_EVALUATION_SCORE_LABEL,
    ATTR_TOKEN_TYPE,
    DURATION_BUCKETS,
    EVALUATION_CONTEXTUAL_RELEVANCY,
    METRIC_CHUNKS_JUDGED,
    METRIC_CHUNKS_RELEVANT,
    METRIC_CHUNKS_UTILIZED,
    METRIC_DIMENSION_OVERFLOW,
    METRIC_EVALUATION_DURATION,
    METRIC_EVALUATION_SCORE,
    METRIC_JUDGE_TOKENS,
    SCORE_BUCKETS,
)

__all__ = ["EvaluationInstruments"]


class EvaluationInstruments:
    """Creates the synchronous instruments on ``meter`` and records one result's points.

    Each point is recorded on its own: one that fails is reported to ``on_error`` under the metric's
    name and the others are still recorded.
    """

    def __init__(self, meter: Meter, on_error: ErrorCallback) -> None:
        self._on_error = on_error
        self._score = meter.create_histogram(
            METRIC_EVALUATION_SCORE,
            unit="1",
            description="Score of each scored evaluation, 0..1, by gen_ai.evaluation.name "
            "(contextual_utilization, contextual_relevancy).",
            explicit_bucket_boundaries_advisory=SCORE_BUCKETS,
        )
        self._relevant = meter.create_counter(
            METRIC_CHUNKS_RELEVANT, unit="{chunk}", description="Distinct retrieved chunks judged relevant."
        )
        self._utilized = meter.create_counter(
            METRIC_CHUNKS_UTILIZED, unit="{chunk}", description="Distinct relevant chunks the answer used."
        )
        self._judged = meter.create_counter(
            METRIC_CHUNKS_JUDGED, unit="{chunk}", description="Distinct retrieved chunks judged."
        )
        self._duration = meter.create_histogram(
            METRIC_EVALUATION_DURATION,
            unit="s",
            description="Wall-clock duration of one evaluation, judge call included.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self._tokens = meter.create_counter(
            METRIC_JUDGE_TOKENS, unit="{token}", description="Tokens spent by the judge."
        )
        self._overflow = meter.create_counter(
            METRIC_DIMENSION_OVERFLOW,
            unit="{value}",
            description="Dimension values reported as _OTHER (dimension_max_values reached), by dimension.",
        )

    def record(
        self,
        result: MetricEvaluationResult,
        duration: float | None,
        relevancy: float | None,
        attributes: dict[str, AttributeValue],
    ) -> None:
        """The points of one result: duration (every result, when valid), and for a result that is not
        an error its score (when scored), the chunk counters and, with ``relevancy``, a
        ``contextual_relevancy`` score point (same attributes, that name, no score label)."""
        if duration is not None:
            self._guard(METRIC_EVALUATION_DURATION, lambda: self._duration.record(duration, attributes))
        if result.label == "error":
            return
        score = result.score
        if score is not None:
            self._guard(METRIC_EVALUATION_SCORE, lambda: self._score.record(finite(score), attributes))
        signals = result.signals
        self._guard(
            METRIC_CHUNKS_RELEVANT,
            lambda: self._relevant.add(count(signals.total_relevant_chunks), attributes),
        )
        self._guard(
            METRIC_CHUNKS_UTILIZED, lambda: self._utilized.add(count(signals.utilized_chunks), attributes)
        )
        self._guard(
            METRIC_CHUNKS_JUDGED, lambda: self._judged.add(count(signals.distinct_chunks), attributes)
        )
        if relevancy is not None:
            point = {k: v for k, v in attributes.items() if k != ATTR_EVALUATION_SCORE_LABEL}
            point[ATTR_EVALUATION_NAME] = EVALUATION_CONTEXTUAL_RELEVANCY
            self._guard(METRIC_EVALUATION_SCORE, lambda: self._score.record(relevancy, point))

    def record_tokens(self, result: MetricEvaluationResult, base: dict[str, AttributeValue]) -> None:
        """Judge tokens of ``result`` (when it has usage), split by ``gen_ai.token.type``."""
        usage = result.usage
        if usage is None:
            return

        def add() -> None:
            self._tokens.add(count(usage.input_tokens), {**base, ATTR_TOKEN_TYPE: "input"})
            self._tokens.add(count(usage.output_tokens), {**base, ATTR_TOKEN_TYPE: "output"})

        self._guard(METRIC_JUDGE_TOKENS, add)

    def count_overflow(self, dimension: str, n: int) -> None:
        """``n`` dimension values reported as ``_OTHER`` (``0`` starts the dimension's series)."""
        self._overflow.add(n, {ATTR_DIMENSION_NAME: dimension})

    def _guard(self, key: str, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:
            self._on_error(key, exc)
