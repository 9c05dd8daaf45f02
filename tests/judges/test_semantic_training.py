"""benchmarks/train_semantic.py end to end, small configuration: trains with each domain held out, exports,
loads, judges, repeats; and the refusal relabelling of the training rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxutil_otel.data import load_sample
from ctxutil_otel.judges import SemanticJudge
from ctxutil_otel.judges._semantic_model import load_semantic_model

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_semantic  # noqa: E402  # benchmarks/ modules, importable once their folder is on the path

SMALL = ["--max-iter", "4", "--vocabulary", "3000", "--date", "2026-01-01"]


@pytest.fixture(scope="module")
def train_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    # 100 bundled-sample rows (RAGBench's format, four subsets) and 20 seed-style training rows (two folds).
    folder = tmp_path_factory.mktemp("train")
    ragbench = folder / "ragbench.jsonl"
    ragbench.write_text("".join(json.dumps(r) + "\n" for r in load_sample(limit=100)), encoding="utf-8")
    seed = folder / "seed.jsonl"
    lines = (ROOT / "benchmarks" / "data" / "seed_style_train.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    by_fold: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_fold.setdefault(train_semantic.fold_name(row), []).append(row)
    seed.write_text(
        "".join(json.dumps(r) + "\n" for f in sorted(by_fold) for r in by_fold[f][:10]), encoding="utf-8"
    )
    return [ragbench, seed]


@pytest.mark.timeout(600)
def test_small_retrain_holds_out_each_domain_writes_a_loadable_model_and_is_reproducible(
    train_files: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "model.json"
    assert train_semantic.main(["--train", *map(str, train_files), "--out", str(out), *SMALL]) == 0
    printed = capsys.readouterr().out
    assert "leave one domain out" in printed and "seed_style_a" in printed and "seed_style_b" in printed
    assert "exported trees reproduce scikit-learn exactly" in printed
    assert "relevant chunks: used P" in printed and "ignored marked used" in printed
    document = json.loads(out.read_text(encoding="utf-8"))
    provenance = document["provenance"]
    assert provenance["seed"] == 20261205 and provenance["date"] == "2026-01-01"
    assert "--max-iter 4" in provenance["command"] and "WordLlama" in provenance["base_model"]
    judge = SemanticJudge(semantic_model=load_semantic_model(document))
    row = load_sample()[0]
    assert len(judge.judge_sync(row["query"], row["actual_output"], row["retrieved_content"])) == len(
        row["retrieved_content"]
    )
    again = tmp_path / "again.json"
    assert train_semantic.main(["--train", *map(str, train_files), "--out", str(again), *SMALL]) == 0
    first = {k: v for k, v in document.items() if k != "provenance"}
    second = {k: v for k, v in json.loads(again.read_text(encoding="utf-8")).items() if k != "provenance"}
    assert first == second


@pytest.mark.parametrize(("offset", "per_chunk"), [(0.8, (0.5, 1.0, 1.0)), (0.5, (1.0, 1.0, 0.0))])
def test_per_chunk_figures_count_the_ignored_relevant_chunks_marked_used(
    offset: float, per_chunk: tuple[float, float, float]
) -> None:
    # Two labelled-relevant chunks, the answer used the first; P(used) 0.9 and 0.4 sum to 1.3 expected, so
    # offset 0.8 counts both in (the ignored one marked used) and offset 0.5 only the first.
    from ctxutil_otel.judges._learned_model import Decision

    row = train_semantic.Variant(
        0, "natural", "f", "q", "a", ["c1", "c2", "c3"], [True, True, False], [True, False, False]
    )
    decision = Decision(0.5, 0.5, offset, 0.5)
    figures = train_semantic.measure([row], [[0.9, 0.9, 0.1]], [[0.9, 0.4, 0.0]], decision, ["all"])
    assert figures["all"].per_chunk() == per_chunk
    nothing = train_semantic.measure(
        [row], [[0.9, 0.9, 0.1]], [[0.9, 0.4, 0.0]], decision, ["all"], nothing=[True]
    )
    assert nothing["all"].per_chunk()[1:] == (0.0, 0.0)  # a non-answer marks nothing used


def test_non_answer_rows_are_relabelled_not_utilized() -> None:
    used = {"relevant": True, "utilized": True}
    rows: list[dict[str, Any]] = [
        {
            "query": "When was X founded?",
            "actual_output": "The passage does not say when X was founded.",
            "chunk_labels": [dict(used), {"relevant": False, "utilized": False}],
        },
        {
            "query": "When was X founded?",
            "actual_output": "X was founded in 1901.",
            "chunk_labels": [dict(used)],
        },
        {
            "query": "What is Y?",
            "actual_output": "I don't know.",
            "chunk_labels": [{"relevant": True, "utilized": False}],
        },
    ]
    assert train_semantic.relabel_non_answers(rows) == (2, 1)
    assert rows[0]["chunk_labels"] == [
        {"relevant": True, "utilized": False},
        {"relevant": False, "utilized": False},
    ]
    assert rows[1]["chunk_labels"] == [used]
