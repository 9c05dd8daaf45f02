"""benchmarks/train_learned.py end to end, small configuration: trains, exports, loads, judges, repeats."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ctxutil_otel.data import load_sample
from ctxutil_otel.judges import LearnedJudge
from ctxutil_otel.judges._learned_model import load_model

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_learned  # noqa: E402  # a benchmarks/ script, importable once its folder is on the path

SMALL = [
    "--max-iter",
    "4",
    "--row-max-iter",
    "3",
    "--folds",
    "2",
    "--vocabulary",
    "3000",
    "--date",
    "2026-01-01",
]


@pytest.fixture(scope="module")
def train_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The bundled sample has the training file's format: 120 of its rows stand in for ragbench_train.jsonl.
    path = tmp_path_factory.mktemp("train") / "train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in load_sample(limit=120)), encoding="utf-8")
    return path


# Three small trainings take ~12 s of CPU; on a shared, loaded machine the wall time can pass the suite's
# default 120 s per test, which is a safety net for hangs, not a speed check.
@pytest.mark.timeout(600)
def test_small_retrain_writes_a_model_the_judge_loads_and_training_is_reproducible(
    train_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "model.json"
    assert train_learned.main(["--train", str(train_file), "--out", str(out), *SMALL]) == 0
    printed = capsys.readouterr().out
    assert "exported trees reproduce scikit-learn exactly" in printed
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["provenance"]["seed"] == 20261201
    assert document["provenance"]["date"] == "2026-01-01"
    assert "--max-iter 4" in document["provenance"]["command"]
    assert len(document["relevance"]["trees"]) == 4 and len(document["row"]["trees"]) == 3

    judge = LearnedJudge(learned_model=load_model(document))
    row = load_sample(limit=1)[0]
    verdicts = judge.judge_sync(row["query"], row["actual_output"], row["retrieved_content"])
    assert [v.index for v in verdicts] == list(range(len(row["retrieved_content"])))
    assert all(v.reason for v in verdicts)

    # Same seed, same data: --check finds the retrained model identical (provenance aside).
    assert train_learned.main(["--train", str(train_file), "--out", str(out), "--check", *SMALL]) == 0
    assert "identical to the retrained model" in capsys.readouterr().out
    # Another seed gives another model, which --check reports.
    assert (
        train_learned.main(["--train", str(train_file), "--out", str(out), "--check", "--seed", "7", *SMALL])
        == 1
    )
    assert "DIFFERS" in capsys.readouterr().out
