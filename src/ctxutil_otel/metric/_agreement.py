"""Agreement between a judge's results and labelled data (pure functions, no I/O).

Compares :class:`~ctxutil_otel.metric.MetricEvaluationResult` objects with RAGBench-style labels
(``chunk_labels`` with ``relevant`` / ``utilized`` per chunk, and ``expected_score``), overall and
per subset. Used by ``ctxutil-otel bench`` and the demo.

Definitions (all counts are over chunks or rows of the rows compared; rows whose result is an
error have no verdicts and are left out of every figure except ``n`` and ``errors``):

* **Score RMSE / MAE** over rows where both ``expected_score`` and the predicted score are not
  ``None`` (``scored`` rows).
* **Relevance precision / recall / F1** over all chunks: predicted ``is_relevant`` against
  ``relevant``.
* **Utilization precision / recall / F1** over the chunks *labelled* relevant: predicted
  ``is_utilized`` (which the metric only sets on chunks it found relevant) against ``utilized``.
  This is the floor of issue 2.
* **Pooled utilization**: sum of utilized-and-relevant chunks over sum of relevant chunks, across
  all rows, for the predictions and for the labels. Chunk-level on both sides (a duplicate chunk
  counts once per occurrence, like the labels), so it can differ slightly from the ratio of the
  ``ctxutil.chunks.*`` counters, which count distinct chunks.
* **Low-utilization AUROC**: how well the predicted score ranks rows with ``expected_score < 0.5``
  (positives) below rows with ``expected_score >= 0.5`` (negatives): the Mann-Whitney U statistic
  with ties counted one half (0.5 = chance, 1.0 = every low row scored below every other row).
  Rows without a predicted score (not applicable) or without an expected score are left out.

Precision, recall and F1 are ``None`` when undefined (no predicted, no labelled, or no positive
chunks at all); F1 is computed as ``2 tp / (2 tp + fp + fn)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._results import MetricEvaluationResult

__all__ = [
    "LOW_SCORE",
    "AgreementFigures",
    "AgreementReport",
    "ChunkLabel",
    "LabelledRow",
    "RowPrediction",
    "agreement",
    "agreement_from_predictions",
    "auroc",
    "prediction_from_result",
]

LOW_SCORE = 0.5
"""Rows whose ``expected_score`` is below this are the positives of the low-utilization AUROC."""


class ChunkLabel(BaseModel):
    """The label of one retrieved chunk."""

    model_config = ConfigDict(frozen=True)

    relevant: bool
    utilized: bool


class LabelledRow(BaseModel):
    """The labels of one interaction (the RAGBench fields of ``ragbench_*.jsonl``).

    Attributes:
        id: Carried for messages only.
        subset: Group for per-subset figures (``None`` rows are counted overall only).
        chunk_labels: One :class:`ChunkLabel` per retrieved chunk, in retrieval order.
        expected_score: Labelled utilization in [0, 1]; ``None`` when no chunk is labelled relevant.
    """

    model_config = ConfigDict(frozen=True)

    id: str | None = None
    subset: str | None = None
    chunk_labels: list[ChunkLabel]
    expected_score: float | None = Field(default=None, ge=0.0, le=1.0)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> LabelledRow:
        """Build from a dataset line, checking ``chunk_labels`` against ``retrieved_content``.

        Raises:
            pydantic.ValidationError: for missing or malformed ``chunk_labels`` / ``expected_score``.
            ValueError: when ``chunk_labels`` and ``retrieved_content`` differ in length (the
                message names both fields).
        """
        raw_id = record.get("id")
        raw_subset = record.get("subset")
        row = cls(
            id=raw_id if isinstance(raw_id, str) else None,
            subset=raw_subset if isinstance(raw_subset, str) else None,
            chunk_labels=record.get("chunk_labels"),  # type: ignore[arg-type]  # validated here
            expected_score=record.get("expected_score"),
        )
        chunks = record.get("retrieved_content")
        if isinstance(chunks, list) and len(chunks) != len(row.chunk_labels):
            raise ValueError(
                f"chunk_labels has {len(row.chunk_labels)} entries but retrieved_content has {len(chunks)}"
            )
        return row


@dataclass(frozen=True)
class RowPrediction:
    """A judge's view of one row: per-chunk verdicts and the score (``error`` rows have neither)."""

    relevant: Sequence[bool]
    utilized: Sequence[bool]
    score: float | None
    error: bool = False
    error_type: str | None = None


def prediction_from_result(result: MetricEvaluationResult) -> RowPrediction:
    """Per-chunk verdicts (``signals.verdicts``, duplicates included) and score of one result."""
    if result.label == "error":
        return RowPrediction((), (), None, error=True, error_type=result.error_type or "unknown")
    verdicts = result.signals.verdicts
    return RowPrediction(
        relevant=[v.is_relevant for v in verdicts],
        utilized=[v.is_relevant and v.is_utilized for v in verdicts],
        score=result.score,
    )


class AgreementFigures(BaseModel):
    """Agreement figures for one group of rows (definitions in the module docstring)."""

    n: int = 0
    scored: int = 0
    errors: int = 0
    error_types: dict[str, int] = Field(default_factory=dict)
    rmse: float | None = None
    mae: float | None = None
    relevance_precision: float | None = None
    relevance_recall: float | None = None
    relevance_f1: float | None = None
    utilization_precision: float | None = None
    utilization_recall: float | None = None
    utilization_f1: float | None = None
    pooled_predicted: float | None = None
    pooled_expected: float | None = None
    low_rows: int = 0
    low_auroc: float | None = None


class AgreementReport(AgreementFigures):
    """Overall figures plus the same figures per subset (sorted by subset name)."""

    per_subset: dict[str, AgreementFigures] = Field(default_factory=dict)


def auroc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """Probability that a random positive scores higher than a random negative, ties counting 1/2.

    Rank-based (Mann-Whitney U with mid-ranks for ties), O(n log n). ``None`` when either side is
    empty. To rank *low* scores as positives, pass negated scores.
    """
    n_pos, n_neg = len(positives), len(negatives)
    if n_pos == 0 or n_neg == 0:
        return None
    values = sorted([(v, True) for v in positives] + [(v, False) for v in negatives], key=lambda p: p[0])
    rank_sum = 0.0
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1][0] == values[i][0]:
            j += 1
        mid_rank = (i + j) / 2 + 1  # 1-based average rank of the tied block
        rank_sum += mid_rank * sum(1 for k in range(i, j + 1) if values[k][1])
        i = j + 1
    u = rank_sum - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)


@dataclass
class _Tally:
    n: int = 0
    errors: int = 0
    error_types: dict[str, int] = field(default_factory=dict)
    errors_sq: float = 0.0
    errors_abs: float = 0.0
    scored: int = 0
    rel: list[int] = field(default_factory=lambda: [0, 0, 0])  # tp, fp, fn
    use: list[int] = field(default_factory=lambda: [0, 0, 0])
    pred_used: int = 0
    pred_relevant: int = 0
    exp_used: int = 0
    exp_relevant: int = 0
    low: list[float] = field(default_factory=list)
    other: list[float] = field(default_factory=list)

    def add(self, row: LabelledRow, pred: RowPrediction) -> None:
        self.n += 1
        if pred.error:
            self.errors += 1
            kind = pred.error_type or "unknown"
            self.error_types[kind] = self.error_types.get(kind, 0) + 1
            return
        for label, relevant, utilized in zip(row.chunk_labels, pred.relevant, pred.utilized, strict=True):
            _count(self.rel, relevant, label.relevant)
            if label.relevant:
                _count(self.use, utilized, label.utilized)
            self.pred_relevant += relevant
            self.pred_used += relevant and utilized
            self.exp_relevant += label.relevant
            self.exp_used += label.relevant and label.utilized
        expected = row.expected_score
        if expected is not None and pred.score is not None:
            self.scored += 1
            diff = pred.score - expected
            self.errors_sq += diff * diff
            self.errors_abs += abs(diff)
            (self.low if expected < LOW_SCORE else self.other).append(-pred.score)

    def figures(self) -> AgreementFigures:
        rel_p, rel_r, rel_f = _prf(*self.rel)
        use_p, use_r, use_f = _prf(*self.use)
        return AgreementFigures(
            n=self.n,
            scored=self.scored,
            errors=self.errors,
            error_types=dict(sorted(self.error_types.items())),
            rmse=math.sqrt(self.errors_sq / self.scored) if self.scored else None,
            mae=self.errors_abs / self.scored if self.scored else None,
            relevance_precision=rel_p,
            relevance_recall=rel_r,
            relevance_f1=rel_f,
            utilization_precision=use_p,
            utilization_recall=use_r,
            utilization_f1=use_f,
            pooled_predicted=self.pred_used / self.pred_relevant if self.pred_relevant else None,
            pooled_expected=self.exp_used / self.exp_relevant if self.exp_relevant else None,
            low_rows=len(self.low),
            low_auroc=auroc(self.low, self.other),
        )


def _count(cell: list[int], predicted: bool, expected: bool) -> None:
    if predicted and expected:
        cell[0] += 1
    elif predicted:
        cell[1] += 1
    elif expected:
        cell[2] += 1


def _prf(tp: int, fp: int, fn: int) -> tuple[float | None, float | None, float | None]:
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return precision, recall, f1


def agreement_from_predictions(
    rows: Sequence[LabelledRow], predictions: Sequence[RowPrediction]
) -> AgreementReport:
    """Compare :class:`RowPrediction` objects with labels, overall and per ``subset``.

    Raises:
        ValueError: when the two sequences differ in length, or a non-error prediction has a
            different number of chunk verdicts than its row has labels (names the row).
    """
    if len(rows) != len(predictions):
        raise ValueError(f"{len(rows)} labelled rows but {len(predictions)} predictions")
    overall = _Tally()
    groups: dict[str, _Tally] = {}
    for position, (row, pred) in enumerate(zip(rows, predictions, strict=True)):
        if not pred.error and not (len(pred.relevant) == len(pred.utilized) == len(row.chunk_labels)):
            name = row.id or f"#{position}"
            raise ValueError(
                f"row {name}: {len(pred.relevant)} chunk verdicts for {len(row.chunk_labels)} chunk labels"
            )
        overall.add(row, pred)
        if row.subset is not None:
            groups.setdefault(row.subset, _Tally()).add(row, pred)
    report = AgreementReport(**overall.figures().model_dump())
    report.per_subset = {name: groups[name].figures() for name in sorted(groups)}
    return report


def agreement(rows: Sequence[LabelledRow], results: Sequence[MetricEvaluationResult]) -> AgreementReport:
    """Compare metric results with labels, row by row in the same order (see the module docstring).

    Raises:
        ValueError: as :func:`agreement_from_predictions`.
    """
    return agreement_from_predictions(rows, [prediction_from_result(r) for r in results])
