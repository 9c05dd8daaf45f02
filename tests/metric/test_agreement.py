"""Agreement functions on small hand-computed examples (every expected number derived in the test)."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from ctxutil_otel import ContextualUtilization, DatasetItem
from ctxutil_otel.metric._agreement import (
    ChunkLabel,
    LabelledRow,
    RowPrediction,
    agreement,
    agreement_from_predictions,
    auroc,
)

from .conftest import ScriptedJudge


def _row(marks: str, expected: float | None, subset: str | None = "a") -> LabelledRow:
    """``marks`` is one token per chunk: "RU" relevant+utilized, "R" relevant, "." neither."""
    labels = [ChunkLabel(relevant="R" in m, utilized="U" in m) for m in marks.split()]
    return LabelledRow(subset=subset, chunk_labels=labels, expected_score=expected)


def _pred(marks: str, score: float | None) -> RowPrediction:
    tokens = marks.split()
    return RowPrediction(
        relevant=["R" in m for m in tokens], utilized=["R" in m and "U" in m for m in tokens], score=score
    )


def test_auroc_hand_computed_cases() -> None:
    assert auroc([3.0, 4.0], [1.0, 2.0]) == 1.0
    assert auroc([1.0, 2.0], [3.0, 4.0]) == 0.0
    assert auroc([0.5, 0.5], [0.5, 0.5, 0.5]) == 0.5  # all tied: chance
    # pairs (pos, neg): (1,2) lose, (1,3) lose, (2,2) tie = 1/2, (2,3) lose -> 0.5 / 4
    assert auroc([1.0, 2.0], [2.0, 3.0]) == pytest.approx(0.125)
    # pairs: (3,1) win, (3,3) tie, (2,1) win, (2,3) lose -> 2.5 / 4
    assert auroc([3.0, 2.0], [1.0, 3.0]) == pytest.approx(0.625)
    assert auroc([], [1.0]) is None
    assert auroc([1.0], []) is None


def test_agreement_from_predictions_matches_first_principles() -> None:
    rows = [
        _row("RU R .", 0.5, "a"),  # label: 2 relevant, 1 used
        _row("RU RU", 1.0, "a"),
        _row("R R R RU", 0.25, "b"),
        _row(". .", None, "b"),
    ]
    preds = [
        _pred("RU RU R", 2 / 3),
        _pred("RU .", 1.0),
        _pred("R . . RU", 0.5),
        _pred("R .", 0.0),
    ]
    report = agreement_from_predictions(rows, preds)

    # Scores: rows 0-2 have both; row 3 has no expected score.
    diffs = [2 / 3 - 0.5, 1.0 - 1.0, 0.5 - 0.25]
    assert report.n == 4 and report.scored == 3 and report.errors == 0
    assert report.rmse == pytest.approx(math.sqrt(sum(d * d for d in diffs) / 3))
    assert report.mae == pytest.approx(sum(abs(d) for d in diffs) / 3)

    # Relevance over all 11 chunks (pred vs label):
    # row0: R/R tp, R/R tp, R/. fp; row1: R/R tp, ./R fn;
    # row2: R/R tp, ./R fn, ./R fn, R/R tp; row3: R/. fp, ./.
    tp, fp, fn = 5, 2, 3
    assert report.relevance_precision == pytest.approx(tp / (tp + fp))
    assert report.relevance_recall == pytest.approx(tp / (tp + fn))
    assert report.relevance_f1 == pytest.approx(2 * tp / (2 * tp + fp + fn))

    # Utilization over the 8 chunks labelled relevant (pred used vs label used):
    # row0: U/U tp, U/. fp; row1: U/U tp, ./U fn; row2: . . . (labels not used, preds not used), U/U tp
    tp, fp, fn = 3, 1, 1
    assert report.utilization_precision == pytest.approx(tp / (tp + fp))
    assert report.utilization_recall == pytest.approx(tp / (tp + fn))
    assert report.utilization_f1 == pytest.approx(2 * tp / (2 * tp + fp + fn))

    # Pooled: predicted used 2+1+1+0 = 4 of relevant 3+1+2+1 = 7; labels used 1+2+1 = 4 of 2+2+4 = 8.
    assert report.pooled_predicted == pytest.approx(4 / 7)
    assert report.pooled_expected == pytest.approx(4 / 8)

    # Low rows (expected < 0.5): row2 only (score 0.5) vs others 2/3 and 1.0 -> ranked lowest: AUROC 1.
    assert report.low_rows == 1
    assert report.low_auroc == 1.0

    assert list(report.per_subset) == ["a", "b"]
    a, b = report.per_subset["a"], report.per_subset["b"]
    assert (a.n, a.scored, b.n, b.scored) == (2, 2, 2, 1)
    assert a.rmse == pytest.approx(math.sqrt(((2 / 3 - 0.5) ** 2 + 0.0) / 2))
    assert b.low_auroc is None  # no row with expected >= 0.5 in b
    assert b.pooled_expected == pytest.approx(1 / 4)


def test_not_applicable_and_error_rows_are_left_out_and_counted() -> None:
    rows = [_row("RU R", 0.5), _row("R R", 0.0), _row("RU", 1.0)]
    preds = [
        _pred(". .", None),  # judge found nothing relevant: no score
        RowPrediction((), (), None, error=True),
        _pred("RU", 1.0),
    ]
    report = agreement_from_predictions(rows, preds)
    assert (report.n, report.scored, report.errors) == (3, 1, 1)
    assert report.rmse == 0.0
    # chunks of the error row are not counted: labels relevant 2 + 1, predicted relevant 0 + 1
    assert report.pooled_expected == pytest.approx(2 / 3)
    assert report.pooled_predicted == 1.0
    assert report.relevance_recall == pytest.approx(1 / 3)
    # the only low row (expected 0.0) is the error row: no positives, no AUROC
    assert report.low_rows == 0 and report.low_auroc is None


def test_undefined_figures_are_none() -> None:
    report = agreement_from_predictions([_row(". .", None)], [_pred(". .", None)])
    assert report.scored == 0
    assert report.rmse is None and report.mae is None
    assert report.relevance_f1 is None and report.utilization_f1 is None
    assert report.pooled_predicted is None and report.pooled_expected is None


def test_length_mismatches_raise() -> None:
    with pytest.raises(ValueError, match="2 labelled rows but 1 predictions"):
        agreement_from_predictions([_row("R", 1.0), _row("R", 1.0)], [_pred("R", 1.0)])
    with pytest.raises(ValueError, match="row x1: 1 chunk verdicts for 2 chunk labels"):
        agreement_from_predictions(
            [LabelledRow(id="x1", chunk_labels=[ChunkLabel(relevant=True, utilized=True)] * 2)],
            [_pred("RU", 1.0)],
        )


def test_labelled_row_from_record_validates_fields() -> None:
    record = {
        "id": "r1",
        "subset": "s",
        "retrieved_content": ["a", "b"],
        "chunk_labels": [{"relevant": True, "utilized": False}, {"relevant": False, "utilized": False}],
        "expected_score": 0.0,
    }
    row = LabelledRow.from_record(record)
    assert (row.id, row.subset, row.expected_score, len(row.chunk_labels)) == ("r1", "s", 0.0, 2)
    with pytest.raises(ValueError, match="chunk_labels has 2 entries but retrieved_content has 3"):
        LabelledRow.from_record({**record, "retrieved_content": ["a", "b", "c"]})
    with pytest.raises(ValidationError, match="chunk_labels"):
        LabelledRow.from_record({**record, "chunk_labels": None})
    with pytest.raises(ValidationError, match="expected_score"):
        LabelledRow.from_record({**record, "expected_score": 1.5})


async def test_agreement_from_metric_results_uses_the_metric_verdicts() -> None:
    """End to end through the real metric with a scripted judge (a real Judge implementation)."""
    judge = ScriptedJudge({"c0": "RU", "c1": "R", "c2": "U", "dup": "RU"})
    metric = ContextualUtilization(judge=judge)
    items = [
        DatasetItem(query="q", actual_output="a", retrieved_content=["c0", "c1", "c2"]),
        # a duplicate chunk carries its original's verdict and is counted per occurrence here
        DatasetItem(query="q", actual_output="a", retrieved_content=["dup", " dup "]),
    ]
    results = [await metric.execute(item) for item in items]
    assert results[0].score == pytest.approx(0.5)  # c2 "utilized" but not relevant: ignored
    rows = [_row("RU RU .", 1.0, "x"), _row("RU R", 0.5, "y")]
    report = agreement(rows, results)
    # row0: pred relevant [T, T, F] vs labels [T, T, F]; pred used [T, F, F] vs labels used [T, T, -]
    # row1: pred [RU, RU] vs labels [RU, R]
    assert report.relevance_f1 == 1.0
    tp, fp, fn = 2, 1, 1  # used: c0 tp, c1 fn; dup tp, " dup " fp
    assert report.utilization_f1 == pytest.approx(2 * tp / (2 * tp + fp + fn))
    assert report.pooled_predicted == pytest.approx(3 / 4)
    assert report.pooled_expected == pytest.approx(3 / 4)
    assert report.rmse == pytest.approx(math.sqrt(((0.5 - 1.0) ** 2 + (1.0 - 0.5) ** 2) / 2))
