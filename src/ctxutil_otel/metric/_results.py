"""Result models of the Contextual Utilization metric (JSON-serialisable with ``model_dump()``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ..judges._base import TokenUsage

__all__ = [
    "ERROR_MESSAGE_MAX_CHARS",
    "ChunkBreakdown",
    "ChunkResult",
    "ContextualUtilizationResult",
    "Label",
    "MetricEvaluationResult",
]

ERROR_MESSAGE_MAX_CHARS = 500
"""Longest ``MetricEvaluationResult.error_message`` kept, in characters."""

Label = Literal["pass", "fail", "not_applicable", "error"]


class ChunkResult(BaseModel):
    """The metric's view of one retrieved chunk (all chunks, relevant or not).

    ``duplicate_of`` is the index of an earlier identical chunk (after whitespace normalisation);
    a duplicate carries its original's verdict but is not counted in the score.
    """

    index: int
    is_relevant: bool
    is_utilized: bool
    reason: str = ""
    duplicate_of: int | None = None


class ChunkBreakdown(BaseModel):
    """One relevant chunk in the diagnostic breakdown (DESIGN.md, "Signals")."""

    index: int
    chunk_text: str
    is_utilized: bool
    reason: str = ""


class ContextualUtilizationResult(BaseModel):
    """The metric's signals: the score and the per-chunk breakdown behind it.

    Attributes:
        utilization_score: ``utilized_chunks / total_relevant_chunks`` in [0, 1]; ``None`` when not
            applicable or on error.
        total_relevant_chunks: Distinct chunks judged relevant.
        utilized_chunks: Distinct relevant chunks judged used by the answer.
        utilization_rate: The score as a percentage string with one decimal, e.g. ``"66.7%"``;
            ``"n/a"`` when there is no score.
        chunk_breakdown: Relevant, distinct chunks only, in retrieval order.
        total_chunks: Number of retrieved chunks, duplicates included.
        distinct_chunks: Number of distinct retrieved chunks (after whitespace normalisation): the
            chunks the judge saw.
        relevancy_score: ``total_relevant_chunks / distinct_chunks`` in [0, 1], the retrieval half of the
            picture (the seed's related metric, *contextual relevancy*: the share of what was retrieved
            that is relevant to the query). Unlike the utilization score it is defined when no chunk is
            relevant (0.0: a retrieval problem); ``None`` when nothing was retrieved or on error.
        verdicts: One :class:`ChunkResult` per retrieved chunk, in retrieval order (empty on error).
    """

    utilization_score: float | None = None
    total_relevant_chunks: int = 0
    utilized_chunks: int = 0
    utilization_rate: str = "n/a"
    chunk_breakdown: list[ChunkBreakdown] = Field(default_factory=list)
    total_chunks: int = 0
    distinct_chunks: int = 0
    relevancy_score: float | None = None
    verdicts: list[ChunkResult] = Field(default_factory=list)


class MetricEvaluationResult(BaseModel):
    """The outcome of evaluating one :class:`~ctxutil_otel.DatasetItem`.

    Attributes:
        metric_name: ``"contextual_utilization"`` (the ``gen_ai.evaluation.name``).
        score: Same as ``signals.utilization_score``.
        passed: ``score >= threshold``; ``None`` when there is no score.
        threshold: The pass threshold used, in [0, 1].
        label: ``pass`` | ``fail`` | ``not_applicable`` | ``error`` (``gen_ai.evaluation.score.label``).
        explanation: One human-readable sentence.
        signals: The diagnostic breakdown.
        error_type: Low-cardinality error class (``error.type``) when ``label == "error"``.
        error_message: What the judge (or its server) said about a failure, at most
            :data:`ERROR_MESSAGE_MAX_CHARS` characters with the API key redacted by the judge. Local only:
            ``evaluate`` writes it to its results and :meth:`pretty` shows it, but it is never exported as
            telemetry (a server may quote the query or part of a key back); ``explanation`` holds our own
            words (error type, HTTP status).
        judge_name / judge_model: Which judge produced the verdicts.
        usage: Judge tokens spent, if the judge reports them (also on a judge failure: what was spent
            before it).
        judge_output_format: The structured-output format a model judge's calls used, if it says.
        judge_format_fallbacks: Times this evaluation's judgement stepped the judge's output format
            down because its server refused it (each step counted once, on one evaluation).
        item_id: The ``id`` of the evaluated item.
    """

    metric_name: str = "contextual_utilization"
    score: float | None
    passed: bool | None
    threshold: float
    label: Label
    explanation: str
    signals: ContextualUtilizationResult
    error_type: str | None = None
    error_message: str | None = None
    judge_name: str | None = None
    judge_model: str | None = None
    usage: TokenUsage | None = None
    judge_output_format: str | None = None
    judge_format_fallbacks: int = 0
    item_id: str | None = None

    @classmethod
    def failure(
        cls,
        *,
        metric_name: str,
        threshold: float,
        error_type: str,
        explanation: str,
        error_message: str | None = None,
        total_chunks: int = 0,
        judge_name: str | None = None,
        judge_model: str | None = None,
        item_id: str | None = None,
    ) -> MetricEvaluationResult:
        """A ``label="error"`` result for an evaluation that failed outside the judge call (invalid input,
        timeout, an unexpected exception): no score, ``passed`` ``None``, ``error_type`` as the
        low-cardinality ``error.type``, ``signals`` empty but for ``total_chunks``."""
        return cls(
            metric_name=metric_name,
            score=None,
            passed=None,
            threshold=threshold,
            label="error",
            explanation=explanation,
            signals=ContextualUtilizationResult(total_chunks=total_chunks),
            error_type=error_type,
            error_message=None if error_message is None else error_message[:ERROR_MESSAGE_MAX_CHARS],
            judge_name=judge_name,
            judge_model=judge_model,
            item_id=item_id,
        )

    def pretty(self, max_chunk_chars: int = 80) -> str:
        """Return a multi-line, human-readable report: score, label, one line per relevant chunk (used or
        ignored, its text and the judge's reason), then, in retrieval order, one line per chunk the score
        leaves out: judged NOT relevant (its index and the judge's reason; its text is not in the result) or
        a duplicate of an earlier chunk (``[4] duplicate of [1], not counted``). Every retrieved index gets
        exactly one line."""
        s = self.signals
        score = "n/a" if self.score is None else f"{self.score:.2f}"
        lines = [
            f"Contextual Utilization: {score} ({self.label}, threshold {self.threshold:g})",
            f"  {s.utilized_chunks} of {s.total_relevant_chunks} relevant chunks used "
            f"({s.utilization_rate}); {s.total_chunks} retrieved",
            f"  {self.explanation}",
        ]
        if self.error_message:
            lines.append(f"  judge said: {self.error_message}")
        for chunk in s.chunk_breakdown:
            text = " ".join(chunk.chunk_text.split())
            if len(text) > max_chunk_chars:
                text = text[: max_chunk_chars - 1] + "…"
            mark = "used   " if chunk.is_utilized else "ignored"
            reason = f" ({chunk.reason})" if chunk.reason else ""
            lines.append(f"  [{chunk.index}] {mark} {text}{reason}")
        for verdict in s.verdicts:
            if verdict.duplicate_of is not None:
                lines.append(f"  [{verdict.index}] duplicate of [{verdict.duplicate_of}], not counted")
            elif not verdict.is_relevant:
                reason = f" ({verdict.reason})" if verdict.reason else ""
                lines.append(f"  [{verdict.index}] not relevant, not counted{reason}")
        return "\n".join(lines)
