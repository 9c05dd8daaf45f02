"""The semantic trainer's study tools: ``--diagnose`` (benchmarks/_semantic_diagnose.py) and the mapping of
RAGBench's sentence labels onto the judge's sentences (benchmarks/_sentence_stack.py)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_semantic  # noqa: E402  # benchmarks/ modules, importable once their folder is on the path
from _semantic_diagnose import diagnose  # noqa: E402
from _sentence_stack import sentence_labels  # noqa: E402

from ctxutil_otel.judges._learned_model import Decision  # noqa: E402

DECISION = Decision(0.5, 0.5, 0.5, 0.5)


def _example(fold: str, relevant: list[bool], utilized: list[bool]) -> train_semantic.Variant:
    chunks = [f"chunk {fold} {i}" for i in range(len(relevant))]
    return train_semantic.Variant(0, "natural", fold, "q", "a", chunks, relevant, utilized)


def _cells(report: str, fold: str) -> dict[str, tuple[float, float, int]]:
    """``{scenario: (low-util AUROC, RMSE, rows)}`` of ``fold``'s line."""
    line = next(x for x in report.splitlines() if x.strip().startswith(fold + " "))
    out = {}
    for cell in line.strip()[len(fold) :].split(";"):
        if "/" in cell:
            name, area, _, rmse, _, n = cell.strip().rsplit(" ", 5)
            out[name] = (float(area), float(rmse), int(n))
    return out


def test_oracle_scenarios_separate_relevance_errors_from_use_errors() -> None:
    # The predictions get use right and relevance wrong (row 2 calls an irrelevant chunk relevant).
    examples = [
        _example("x", [True, True, False], [True, False, False]),  # 1 of 2 used: 0.5
        _example("x", [True, False, False], [True, False, False]),  # 1.0
        _example("x", [True, True, True], [False, False, True]),  # 1 of 3: a low row
    ]
    rel = [[0.9, 0.9, 0.1], [0.9, 0.9, 0.1], [0.9, 0.9, 0.9]]
    use = [[0.9, 0.1, 0.1], [0.9, 0.1, 0.1], [0.1, 0.1, 0.9]]
    cells = _cells(diagnose(examples, rel, use, DECISION, ["x", "all"]), "all")
    assert cells["oracle rel"][1] == 0.0  # labelled relevance and right use: every score exact
    assert cells["oracle use"] == cells["shipped"]  # use was right: labels change nothing
    assert cells["shipped"][1] > 0.2  # row 2 reads 0.5 against 1.0
    assert cells["shipped"][2] == 3


def test_ragbench_sentence_labels_map_onto_the_judges_sentences_by_characters() -> None:
    chunk = "Title: Tea\nPassage: Tea came from China, long ago, in the south. It has catechins."
    labelled = [("Title: Tea", False), ("Passage: Tea came from China, long ago, in the south.", False)]
    labelled.append(("It has catechins.", True))
    parts = ["Title: Tea", "Passage: Tea came from China, long ago, in the south.", " It has catechins."]
    assert sentence_labels(chunk, parts, labelled) == [False, False, True]
    # a judge sentence that spans a labelled one and more is relevant when at least half of it is
    assert sentence_labels(chunk, [chunk], labelled) == [False]
