"""Small functions ``MetricEvaluationResult -> attribute value``, each allowed to fail on its own.

Each extractor reads one attribute. :func:`extract` runs them one by one: an extractor that raises loses
only its own attribute and is reported through ``on_error(key, exc)`` (the emitter logs it once, at debug).
An extractor returning ``None`` means "absent" (e.g. no score on a not-applicable result).

Also the other attribute sets built from a result or an interaction: the bounded metric attributes, the
interaction's ids, captured content, and the ``ctxutil.evaluations`` outcome observations. The per-chunk
attributes ``ctxutil.chunks.{i}.*`` are built in ``_chunk_attributes.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

from opentelemetry.util.types import AttributeValue

from .._accounting import ERROR_TYPE_OTHER, checked_error_type
from .._interaction import Interaction
from .._item import DatasetItem
from .._redact import redact
from ..metric._results import MetricEvaluationResult
from ._identity import truncate
from ._names import (
    ATTR_ANSWER,
    ATTR_APPLICATION_NAME,
    ATTR_ERROR_TYPE,
    ATTR_EVALUATION_EXPLANATION,
    ATTR_EVALUATION_NAME,
    ATTR_EVALUATION_SCORE_LABEL,
    ATTR_EVALUATION_SCORE_VALUE,
    ATTR_INTERACTION_ID,
    ATTR_INTERACTION_SOURCE,
    ATTR_JUDGE_FORMAT_FALLBACKS,
    ATTR_JUDGE_INPUT_TOKENS,
    ATTR_JUDGE_MODEL,
    ATTR_JUDGE_NAME,
    ATTR_JUDGE_OUTPUT_FORMAT,
    ATTR_JUDGE_OUTPUT_TOKENS,
    ATTR_OUTCOME,
    ATTR_QUERY,
    ATTR_REASON,
    ATTR_RESPONSE_ID,
    ATTR_THRESHOLD,
    ATTR_TOTAL_CHUNKS,
    ATTR_TOTAL_RELEVANT_CHUNKS,
    ATTR_UTILIZATION_RATE,
    ATTR_UTILIZATION_SCORE,
    ATTR_UTILIZED_CHUNKS,
    METRIC_EVALUATIONS,
)

__all__ = [
    "DROP_REASON_UNKNOWN",
    "ERROR_TYPE_OTHER",
    "EXPLANATION_MAX_CHARS",
    "MAX_COUNT",
    "RESULT_EXTRACTORS",
    "ErrorCallback",
    "Extractor",
    "content_attributes",
    "count",
    "extract",
    "finite",
    "interaction_attributes",
    "metric_attributes",
    "outcome_observations",
    "redact",
    "truncate",
    "valid_duration",
]

Extractor = Callable[[MetricEvaluationResult], "AttributeValue | None"]
ErrorCallback = Callable[[str, BaseException], None]

DROP_REASON_UNKNOWN = "unknown"
EXPLANATION_MAX_CHARS = 500


def finite(value: float) -> float:
    """``float(value)``; raises ``ValueError`` for NaN and infinities."""
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {value!r}")
    return number


MAX_COUNT = 10**12
"""Largest value one counter ``add`` takes (chunks, judge tokens): an OTLP exporter encodes a counter's
cumulative sum as a signed 64-bit integer, and one value past that range fails the export of every
metric of the MeterProvider, the application's included. 10^12 leaves room for 9 million adds."""


def count(value: object) -> int:
    """``value`` if it is an ``int`` (not ``bool``) in [0, :data:`MAX_COUNT`]; raises ``ValueError``
    otherwise (the emitter then skips that one instrument and counts the failure)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        shown = repr(value)[:30]
        raise ValueError(f"expected an int in [0, {MAX_COUNT}], got {shown}")
    return value


def valid_duration(duration_s: object) -> float | None:
    """Seconds as a finite, non-negative ``float``, else ``None``."""
    try:
        duration = float(duration_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return duration if math.isfinite(duration) and duration >= 0 else None


def _evaluation_name(r: MetricEvaluationResult) -> AttributeValue | None:
    return str(r.metric_name)


def _score_value(r: MetricEvaluationResult) -> AttributeValue | None:
    return None if r.score is None else finite(r.score)


def _score_label(r: MetricEvaluationResult) -> AttributeValue | None:
    return str(r.label)


def _explanation(r: MetricEvaluationResult) -> AttributeValue | None:
    return truncate(redact(str(r.explanation)), EXPLANATION_MAX_CHARS) if r.explanation else None


def _error_type(r: MetricEvaluationResult) -> AttributeValue | None:
    if r.label != "error":
        return None
    return checked_error_type(r.error_type)


def _utilization_score(r: MetricEvaluationResult) -> AttributeValue | None:
    score = r.signals.utilization_score
    return None if score is None else finite(score)


def _total_relevant_chunks(r: MetricEvaluationResult) -> AttributeValue | None:
    return int(r.signals.total_relevant_chunks)


def _utilized_chunks(r: MetricEvaluationResult) -> AttributeValue | None:
    return int(r.signals.utilized_chunks)


def _utilization_rate(r: MetricEvaluationResult) -> AttributeValue | None:
    return str(r.signals.utilization_rate)


def _total_chunks(r: MetricEvaluationResult) -> AttributeValue | None:
    return int(r.signals.total_chunks)


def _threshold(r: MetricEvaluationResult) -> AttributeValue | None:
    return finite(r.threshold)


def _judge_name(r: MetricEvaluationResult) -> AttributeValue | None:
    return None if r.judge_name is None else str(r.judge_name)


def _judge_model(r: MetricEvaluationResult) -> AttributeValue | None:
    return None if r.judge_model is None else str(r.judge_model)


def _input_tokens(r: MetricEvaluationResult) -> AttributeValue | None:
    return None if r.usage is None else count(r.usage.input_tokens)


def _output_tokens(r: MetricEvaluationResult) -> AttributeValue | None:
    return None if r.usage is None else count(r.usage.output_tokens)


def _judge_output_format(r: MetricEvaluationResult) -> AttributeValue | None:
    return None if r.judge_output_format is None else str(r.judge_output_format)


def _judge_format_fallbacks(r: MetricEvaluationResult) -> AttributeValue | None:
    return count(r.judge_format_fallbacks) or None


RESULT_EXTRACTORS: dict[str, Extractor] = {
    ATTR_EVALUATION_NAME: _evaluation_name,
    ATTR_EVALUATION_SCORE_VALUE: _score_value,
    ATTR_EVALUATION_SCORE_LABEL: _score_label,
    ATTR_EVALUATION_EXPLANATION: _explanation,
    ATTR_ERROR_TYPE: _error_type,
    ATTR_UTILIZATION_SCORE: _utilization_score,
    ATTR_TOTAL_RELEVANT_CHUNKS: _total_relevant_chunks,
    ATTR_UTILIZED_CHUNKS: _utilized_chunks,
    ATTR_UTILIZATION_RATE: _utilization_rate,
    ATTR_TOTAL_CHUNKS: _total_chunks,
    ATTR_THRESHOLD: _threshold,
    ATTR_JUDGE_NAME: _judge_name,
    ATTR_JUDGE_MODEL: _judge_model,
    ATTR_JUDGE_INPUT_TOKENS: _input_tokens,
    ATTR_JUDGE_OUTPUT_TOKENS: _output_tokens,
    ATTR_JUDGE_OUTPUT_FORMAT: _judge_output_format,
    ATTR_JUDGE_FORMAT_FALLBACKS: _judge_format_fallbacks,
}
"""Attribute key -> extractor, for the evaluation span and the ``gen_ai.evaluation.result`` log record."""


def extract(
    extractors: Mapping[str, Extractor], result: MetricEvaluationResult, on_error: ErrorCallback
) -> dict[str, AttributeValue]:
    """Run every extractor; keep the values that are not ``None``; report failures, never raise."""
    out: dict[str, AttributeValue] = {}
    for key, extractor in extractors.items():
        try:
            value = extractor(result)
        except Exception as exc:
            on_error(key, exc)
            continue
        if value is not None:
            out[key] = value
    return out


def metric_attributes(
    result: MetricEvaluationResult, application_name: str | None
) -> dict[str, AttributeValue]:
    """The bounded attribute set of the per-result metrics: evaluation name, score label, application name.

    Raises:
        Exception: whatever reading the result raises (the emitter then skips that result's metrics).
    """
    attributes: dict[str, AttributeValue] = {
        ATTR_EVALUATION_NAME: str(result.metric_name),
        ATTR_EVALUATION_SCORE_LABEL: str(result.label),
    }
    if application_name:
        attributes[ATTR_APPLICATION_NAME] = application_name
    return attributes


def interaction_attributes(
    interaction: Interaction, application_name: str | None
) -> dict[str, AttributeValue]:
    """``ctxutil.application.name`` (when configured), ``ctxutil.interaction.id`` and ``.source``, and
    ``gen_ai.response.id`` when capture saw one: for spans and log records only, never metrics (ids are
    unbounded)."""
    attributes: dict[str, AttributeValue] = {}
    if application_name:
        attributes[ATTR_APPLICATION_NAME] = application_name
    for key, value in (
        (ATTR_INTERACTION_ID, interaction.id),
        (ATTR_INTERACTION_SOURCE, interaction.source),
        (ATTR_RESPONSE_ID, getattr(interaction, "response_id", None)),
    ):
        if value is not None:
            attributes[key] = str(value)
    return attributes


def content_attributes(
    interaction: Interaction, item: DatasetItem | None, max_chars: int
) -> dict[str, AttributeValue]:
    """``ctxutil.query`` / ``ctxutil.answer`` truncated (content capture only): from ``item`` when given."""
    query = item.query if item is not None else interaction.query
    answer = item.actual_output if item is not None else interaction.answer
    attributes: dict[str, AttributeValue] = {}
    for key, value in ((ATTR_QUERY, query), (ATTR_ANSWER, answer)):
        if isinstance(value, str):
            attributes[key] = truncate(value, max_chars)
    return attributes


def outcome_observations(
    counts: Mapping[tuple[str, str | None], int], application_name: str | None, on_error: ErrorCallback
) -> list[tuple[dict[str, AttributeValue], int]]:
    """``{(outcome, detail): n}`` -> ``[(attributes, n)]`` for ``ctxutil.evaluations``.

    ``failed`` gets ``error.type`` = detail (``_OTHER`` when ``None``), ``dropped`` gets ``reason`` = detail
    (``unknown`` when ``None``); other outcomes carry no detail, and entries that end up with the same
    attributes are summed. A malformed entry is reported and skipped.
    """
    merged: dict[tuple[tuple[str, AttributeValue], ...], int] = {}
    for key, n in counts.items():
        try:
            outcome, detail = key
            attributes: dict[str, AttributeValue] = {ATTR_OUTCOME: str(outcome)}
            if outcome == "failed":
                attributes[ATTR_ERROR_TYPE] = checked_error_type(detail)
            elif outcome == "dropped":
                attributes[ATTR_REASON] = str(detail) if detail else DROP_REASON_UNKNOWN
            if application_name:
                attributes[ATTR_APPLICATION_NAME] = application_name
            frozen = tuple(sorted(attributes.items()))
            merged[frozen] = merged.get(frozen, 0) + count(n)
        except Exception as exc:
            on_error(METRIC_EVALUATIONS, exc)
    return [(dict(attrs), n) for attrs, n in merged.items()]
