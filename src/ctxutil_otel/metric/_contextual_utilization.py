"""Contextual Utilization: of the retrieved chunks relevant to the query, the share the answer used.

    score = utilized relevant chunks / relevant chunks        (DESIGN.md, "The metric")

This module is pure scoring around a :class:`~ctxutil_otel.judges.Judge`: it deduplicates chunks,
calls the judge once, validates the verdicts one to one, and applies the decided edge cases.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal, TypeAlias

from .._accounting import ERROR_TYPE_OTHER, checked_error_type
from .._item import DatasetItem
from .._mode import EvaluationMode
from ..judges._base import ChunkVerdict, Judge, JudgeError, JudgeResult, VerdictMismatchError
from ._results import (
    ERROR_MESSAGE_MAX_CHARS,
    ChunkBreakdown,
    ChunkResult,
    ContextualUtilizationResult,
    Label,
    MetricEvaluationResult,
)

__all__ = ["ContextualUtilization", "EvaluationMode", "JudgeName", "normalise_chunk", "validate_verdicts"]

_log = logging.getLogger("ctxutil_otel.metric")

#: The judge names ``ContextualUtilization(judge=...)`` takes: the ``judge`` setting's values.
JudgeName: TypeAlias = Literal["semantic", "learned", "lexical", "openai"]
METRIC_NAME = "contextual_utilization"


def normalise_chunk(text: str) -> str:
    """Whitespace-normalised form used to detect identical chunks (runs of whitespace -> one space)."""
    return " ".join(text.split())


def validate_verdicts(verdicts: Sequence[ChunkVerdict], n_chunks: int) -> list[ChunkVerdict]:
    """Return ``verdicts`` ordered by index if they cover ``range(n_chunks)`` exactly once.

    Raises:
        VerdictMismatchError: naming the missing, duplicate or out-of-range indices.
    """
    by_index: dict[int, ChunkVerdict] = {}
    duplicate: set[int] = set()
    extra: set[int] = set()
    for verdict in verdicts:
        if verdict.index >= n_chunks:
            extra.add(verdict.index)
        elif verdict.index in by_index:
            duplicate.add(verdict.index)
        else:
            by_index[verdict.index] = verdict
    missing = sorted(set(range(n_chunks)) - set(by_index))
    if missing or duplicate or extra:
        raise VerdictMismatchError(
            f"judge verdicts do not match {n_chunks} chunks one to one: "
            f"missing={missing[:10]} duplicate={sorted(duplicate)[:10]} out_of_range={sorted(extra)[:10]}"
        )
    return [by_index[i] for i in range(n_chunks)]


def _judge_of(judge: Judge | str | None) -> Judge:
    """The judge ``ContextualUtilization(judge=...)`` names: a judge as given, a name or ``None`` resolved
    as the settings resolve ``judge`` (see the class)."""
    if judge is None or isinstance(judge, str):
        from ..judges._from_settings import build_judge, build_named_judge, judge_settings

        if judge is None:  # only the judge's settings: another invalid CTXUTIL_* variable is a warning
            return build_judge(judge_settings())
        return build_named_judge(judge_settings(judge=judge))  # an unknown name: SettingsError naming judge
    if isinstance(judge, type) or not callable(getattr(judge, "judge", None)):
        raise TypeError(
            "judge must be a Judge instance (an object with an async judge(query, answer, chunks) method, "
            "e.g. LexicalJudge()), a judge name ('semantic', 'learned', 'lexical', 'openai') or None, "
            f"got {f'the class {judge.__name__}' if isinstance(judge, type) else type(judge).__name__}"
        )
    return judge  # duck-typed: a judge without ``model`` is taken too


def _rate(score: float | None) -> str:
    return "n/a" if score is None else f"{score * 100:.1f}%"


class ContextualUtilization:
    """The Contextual Utilization metric.

    Args:
        judge: Any :class:`~ctxutil_otel.judges.Judge`; or a judge name, as the ``judge`` setting takes it
            (``"semantic"``, ``"learned"``, ``"lexical"``, ``"openai"``; the other ``judge_*`` settings
            from ``CTXUTIL_*``, read once here); ``None``: the judge the settings configure
            (``CTXUTIL_JUDGE`` and the ``judge_*`` settings, read once here), as every other path does: by
            default the offline :class:`~ctxutil_otel.judges.SemanticJudge` (no network, no key; with the
            ``semantic`` extra missing, :class:`~ctxutil_otel.judges.LearnedJudge` and one warning; only
            the default falls back: ``judge="semantic"`` without the extra raises).
        threshold: Pass threshold in [0, 1]; a result passes when ``score >= threshold`` (0.0 is
            honoured: every scored result passes).
        mode: :class:`EvaluationMode` (``GRANULAR`` reasons per chunk, or ``FAST`` without).

    Raises:
        ValueError: if ``threshold`` is outside [0, 1] or not a number.
        TypeError: naming ``judge`` and what it takes, for anything else (a judge class, not an instance).
        SettingsError: (a ``ValueError``) with a judge name or no ``judge``, for an unknown name or an
            invalid ``CTXUTIL_JUDGE*`` setting, naming it (only the judge's settings are read: another
            invalid ``CTXUTIL_*`` variable is one WARNING naming it).
        SemanticExtraMissingError: (an ``ImportError``) for ``judge="semantic"`` without the
            ``semantic`` extra.
    """

    name = METRIC_NAME

    def __init__(
        self,
        judge: Judge | JudgeName | None = None,
        *,
        threshold: float = 0.5,
        mode: EvaluationMode | str = EvaluationMode.GRANULAR,
    ) -> None:
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not 0.0 <= threshold <= 1.0
        ):
            raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
        self.judge: Judge = _judge_of(judge)
        self.threshold = float(threshold)
        self.mode = EvaluationMode(mode)

    @property
    def _judge_name(self) -> str:
        return str(getattr(self.judge, "name", type(self.judge).__name__))

    @property
    def _judge_model(self) -> str | None:
        model = getattr(self.judge, "model", None)
        return None if model is None else str(model)

    def _result(
        self,
        signals: ContextualUtilizationResult,
        explanation: str,
        item: DatasetItem,
        judged: JudgeResult | None = None,
        error_type: str | None = None,
        error_message: str | None = None,
        failure: JudgeError | None = None,
    ) -> MetricEvaluationResult:
        """The result of one evaluation: ``judged`` (the judge's answer, when it gave one) or ``failure``
        (its error) carry the tokens spent and the output format."""
        score = signals.utilization_score
        spent = judged if judged is not None else failure  # tokens are spent on failures too
        label: Label
        passed: bool | None
        if error_type is not None:
            label, passed = "error", None
        elif score is None:
            label, passed = "not_applicable", None
        else:
            passed = score >= self.threshold
            label = "pass" if passed else "fail"
        return MetricEvaluationResult(
            score=score,
            passed=passed,
            threshold=self.threshold,
            label=label,
            explanation=explanation,
            signals=signals,
            error_type=error_type,
            error_message=error_message,
            judge_name=self._judge_name,
            judge_model=self._judge_model,
            usage=spent.usage if spent is not None else None,
            judge_output_format=None if judged is None else judged.output_format,
            judge_format_fallbacks=0 if spent is None else spent.format_fallbacks,
            item_id=item.id,
        )

    async def execute(self, item: DatasetItem) -> MetricEvaluationResult:
        """Evaluate one interaction.

        Never raises for a judge failure: a :class:`~ctxutil_otel.judges.JudgeError` or any other
        exception from the judge gives ``label="error"`` with ``error_type`` set (a judge error's
        ``error_type`` when it is snake case, else ``_OTHER``; the class name of another exception goes
        in ``error_message``) and no score. Cancellation propagates.
        """
        chunks = item.retrieved_content
        total = len(chunks)
        if total == 0:
            return self._result(
                ContextualUtilizationResult(total_chunks=0), "No chunks were retrieved: not applicable.", item
            )
        # Identical chunks (after whitespace normalisation) are judged once and counted once.
        first_of: dict[str, int] = {}
        unique: list[int] = []
        original: list[int] = []
        for i, text in enumerate(chunks):
            key = normalise_chunk(text)
            if key not in first_of:
                first_of[key] = i
                unique.append(i)
            original.append(first_of[key])
        reasons = self.mode is EvaluationMode.GRANULAR
        try:
            if reasons:
                judged = await self.judge.judge(item.query, item.actual_output, [chunks[i] for i in unique])
            else:
                judged = await self.judge.judge(
                    item.query, item.actual_output, [chunks[i] for i in unique], reasons=False
                )
            ordered = validate_verdicts(judged.verdicts, len(unique))
        except JudgeError as exc:
            # The message may quote the server, which may quote the query: the log gets our words only.
            _log.debug("judge %s failed (%s)", self._judge_name, exc.error_type)
            error_type = checked_error_type(exc.error_type)
            return self._error(item, error_type, str(exc), getattr(exc, "status_code", None), exc)
        except Exception as exc:  # a judge must not take the caller down; counted as _OTHER
            _log.debug("judge %s raised %s", self._judge_name, type(exc).__name__)
            return self._error(item, ERROR_TYPE_OTHER, f"{type(exc).__name__}: {exc}")
        return self._score(item, unique, original, ordered, judged)

    def _error(
        self,
        item: DatasetItem,
        error_type: str,
        message: str,
        status: object = None,
        failure: JudgeError | None = None,
    ) -> MetricEvaluationResult:
        # The explanation is exported as telemetry, so it is our own words (error type, HTTP status);
        # what the judge or its server wrote stays in ``error_message``, which is never exported.
        signals = ContextualUtilizationResult(total_chunks=len(item.retrieved_content))
        http = f", HTTP {status}" if isinstance(status, int) else ""
        explanation = f"Judge {self._judge_name} failed ({error_type}{http})."
        return self._result(
            signals,
            explanation,
            item,
            error_type=error_type,
            error_message=message[:ERROR_MESSAGE_MAX_CHARS],
            failure=failure,
        )

    def _score(
        self,
        item: DatasetItem,
        unique: list[int],
        original: list[int],
        ordered: list[ChunkVerdict],
        judged: JudgeResult,
    ) -> MetricEvaluationResult:
        chunks = item.retrieved_content
        answer_empty = not item.actual_output.strip()
        keep_reasons = self.mode is EvaluationMode.GRANULAR
        by_chunk: dict[int, ChunkResult] = {}
        for position, chunk_index in enumerate(unique):
            verdict = ordered[position]
            utilized = verdict.is_relevant and verdict.is_utilized and not answer_empty
            reason = verdict.reason if keep_reasons else ""
            if keep_reasons and answer_empty and verdict.is_relevant:
                reason = "the answer is empty"
            by_chunk[chunk_index] = ChunkResult(
                index=chunk_index, is_relevant=verdict.is_relevant, is_utilized=utilized, reason=reason
            )
        all_chunks: list[ChunkResult] = []
        for i in range(len(chunks)):
            first = original[i]
            if first == i:
                all_chunks.append(by_chunk[i])
            else:
                all_chunks.append(by_chunk[first].model_copy(update={"index": i, "duplicate_of": first}))
        breakdown = [
            ChunkBreakdown(
                index=c.index, chunk_text=chunks[c.index], is_utilized=c.is_utilized, reason=c.reason
            )
            for c in all_chunks
            if c.is_relevant and c.duplicate_of is None
        ]
        relevant = len(breakdown)
        used = sum(1 for c in breakdown if c.is_utilized)
        score = None if relevant == 0 else used / relevant
        signals = ContextualUtilizationResult(
            utilization_score=score,
            total_relevant_chunks=relevant,
            utilized_chunks=used,
            utilization_rate=_rate(score),
            chunk_breakdown=breakdown,
            total_chunks=len(chunks),
            distinct_chunks=len(unique),
            relevancy_score=relevant / len(unique),
            verdicts=all_chunks,
        )
        if score is None:
            explanation = f"None of the {len(unique)} distinct retrieved chunks is relevant: not applicable."
        elif answer_empty:
            explanation = f"The answer is empty: none of the {relevant} relevant chunks was used."
        else:
            explanation = f"The answer used {used} of {relevant} relevant chunks ({_rate(score)})."
        return self._result(signals, explanation, item, judged=judged)
