"""benchmarks/train_learned.py end to end, small configuration: trains, exports, loads, judges, repeats."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from ctxutil_otel.data import load_sample
from ctxutil_otel.judges import LearnedJudge
from ctxutil_otel.judges._learned_model import load_model

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import _train_data  # noqa: E402  # benchmarks/ modules, importable once their folder is on the path
import _train_models  # noqa: E402
import train_learned  # noqa: E402

SMALL = [
    "--max-iter",
    "4",
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
    # The measures out of fold on train, the guide for choosing variants without dev.
    assert "out of fold on train: low-score AUROC" in printed and "truncate drop" in printed
    assert "per subset (out of fold):" in printed
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["provenance"]["seed"] == 20261201
    assert re.fullmatch(r"ctxutil-gbdt-ragbench-seed20261201-[0-9a-f]{8}", document["provenance"]["model_id"])
    assert document["provenance"]["date"] == "2026-01-01"
    assert "--max-iter 4" in document["provenance"]["command"]
    assert len(document["relevance"]["trees"]) == 4 and len(document["utilization"]["trees"]) == 4
    # Format 4: two chunk ensembles and the decision; no row model.
    assert "row" not in document
    assert set(document["decision"]) == {
        "relevance_threshold",
        "fallback_threshold",
        "round_offset",
        "nothing_fallback",
    }
    assert "empty answer (nothing_fallback " in printed  # chosen on the empty-answer copies, out of fold

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
    # Leave one subset out: each subset's rows are judged by models that never saw that subset.
    train_learned.main(
        ["--train", str(train_file), "--out", str(out), "--check", "--folds-by", "subset", *SMALL]
    )
    printed = capsys.readouterr().out
    assert "per subset (each judged by chunk models that never saw it):" in printed
    subsets = {row["subset"] for row in load_sample(limit=120)}
    assert len(subsets) > 1 and all(f"  [{name}] " in printed for name in subsets)


def _row(answer: str, sentence_keys: bool = True) -> dict[str, object]:
    row: dict[str, object] = {
        "subset": "demo",
        "query": "What do we know about the Foo comet?",
        "actual_output": answer,
        "retrieved_content": [
            "The Foo comet was discovered in 1911 by Ada Brandt. It has a blue tail.",
            "Its orbit lasts 76 years and it last passed in 1986. Astronomers tracked it closely.",
            "Comets are icy bodies.",
        ],
        "chunk_labels": [
            {"relevant": True, "utilized": True},
            {"relevant": True, "utilized": True},
            {"relevant": True, "utilized": False},
        ],
    }
    if sentence_keys:
        row["documents_sentences"] = [
            [["0a", "The Foo comet was discovered in 1911 by Ada Brandt."], ["0b", "It has a blue tail."]],
            [
                ["1a", "Its orbit lasts 76 years and it last passed in 1986."],
                ["1b", "Astronomers tracked it."],
            ],
            [["2a", "Comets are icy bodies."]],
        ]
        row["utilized_sentence_keys"] = ["0a", "1a"]
    return row


@pytest.mark.parametrize("sentence_keys", [True, False])
def test_a_truncated_copy_keeps_only_the_chunks_its_first_sentence_draws_on(sentence_keys: bool) -> None:
    answer = "Ada Brandt discovered it in 1911. Its orbit lasts 76 years; it last passed in 1986."
    row = _row(answer, sentence_keys)
    cut = _train_data.first_sentence(answer)
    assert cut == "Ada Brandt discovered it in 1911."
    # chunk 0 holds the first sentence; chunk 1 was used for the second one only; chunk 2 was not used.
    assert _train_data.first_sentence_uses(row, cut) == [True, False, False]
    # The whole answer still draws on both used chunks.
    assert _train_data.first_sentence_uses(row, answer) == [True, True, False]


def test_copies_share_their_rows_fold_and_carry_the_derived_labels() -> None:
    import random

    from ctxutil_otel.judges._learned_features import WordWeights

    rows = [
        _row("Ada Brandt discovered it in 1911. Its orbit lasts 76 years; it last passed in 1986."),
        _row("It was discovered in 1911."),
        _row("It was discovered in 1911."),
    ]
    # the third row retrieved other chunks (one shared with the others: never an off-topic chunk for them)
    rows[2]["retrieved_content"] = ["Bananas are yellow.", "Paris is in France.", "Comets are icy bodies."]
    made = _train_data.examples_of(rows, WordWeights(), random.Random(0))
    kinds = [(ex.kind, ex.row_index) for ex in made]
    # one swapped copy per row; a truncated copy only of the two-sentence answer; a replaced copy when the
    # partner retrieved chunks the row did not; appended copies only from chunks the row did not retrieve
    assert kinds[:7] == [
        ("natural", 0),
        ("natural", 1),
        ("natural", 2),
        ("swapped", 0),
        ("swapped", 1),
        ("swapped", 2),
        ("truncated", 0),
    ]
    assert made[3].utilized == [False, False, False] and made[3].relevant == [True, True, True]
    assert made[6].utilized == [True, False, False] and made[6].score == 1 / 3
    # one echo copy per row: the answer is the query, nothing used, relevance kept
    echo = [ex for ex in made if ex.kind == _train_data.ECHO]
    assert [ex.row_index for ex in echo] == [0, 1, 2]
    for ex in echo:
        assert not any(ex.utilized) and ex.relevant == made[ex.row_index].relevant and ex.score == 0.0
    # then one wrong-source copy per row: another row's chunk appended and the answer copied from
    # it; that chunk not relevant, the row's own chunks keep their relevance and are not used
    wrong = [ex for ex in made if ex.kind == _train_data.WRONG_SOURCE]
    # then the partial copies, last: only the answer drawing on two used chunks, cut to the sentences of
    # the first (relevance kept, chunk 1 no longer used)
    partial = [ex for ex in made if ex.kind == _train_data.PARTIAL]
    assert [(ex.row_index, ex.utilized) for ex in partial] == [(0, [True, False, False])]
    assert partial[0].relevant == made[0].relevant and partial[0].score == 1 / 3
    # then the empty-answer copies: one per row with its own chunks (relevance kept, nothing used), one
    # per row whose partner retrieved other chunks, with those (nothing relevant)
    empty = [ex for ex in made if ex.kind == _train_data.EMPTY]
    empty_other = [ex for ex in made if ex.kind == _train_data.EMPTY_REPLACED]
    replaced = [ex.row_index for ex in made if ex.kind == _train_data.REPLACED]
    assert [ex.row_index for ex in empty] == [0, 1, 2] and [ex.row_index for ex in empty_other] == replaced
    for ex in empty:
        assert ex.relevant == made[ex.row_index].relevant and not any(ex.utilized)
    assert not any(r for ex in empty_other for r in ex.relevant)
    tail = echo + wrong + partial + empty + empty_other
    assert [ex.row_index for ex in wrong] == [0, 1, 2] and made[-len(tail) :] == tail
    for ex in wrong:
        natural = made[ex.row_index]
        n = len(natural.relevant)
        assert len(ex.relevant) == n + 1 and not ex.relevant[n] and ex.relevant[:n] == natural.relevant
        assert not any(ex.utilized) and ex.score == (0.0 if any(natural.relevant) else None)
    middle = made[7 : -len(tail)]
    for ex in middle:
        assert ex.kind in (_train_data.REPLACED, _train_data.APPENDED)
        n = len(ex.relevant) - ex.appended
        natural = made[ex.row_index]
        if ex.kind == _train_data.REPLACED:  # nothing relevant: not applicable
            assert not any(ex.relevant) and not any(ex.utilized) and ex.score is None
        else:  # own labels kept, the appended chunks not relevant: same labelled score
            assert ex.relevant[:n] == natural.relevant and ex.utilized[:n] == natural.utilized
            assert not any(ex.relevant[n:]) and ex.score == natural.score
    assert {ex.kind for ex in middle} == {_train_data.REPLACED, _train_data.APPENDED}


def test_copies_cut_to_two_sentences_keep_the_chunks_either_kept_sentence_draws_on() -> None:
    import random

    from ctxutil_otel.judges._learned_features import WordWeights

    row = _row(
        "Ada Brandt discovered it in 1911. Its orbit lasts 76 years; it last passed in 1986. "
        "Comets are icy bodies."
    )
    row["chunk_labels"][2] = {"relevant": True, "utilized": True}  # type: ignore[index]  # test data
    row["utilized_sentence_keys"] = ["0a", "1a", "2a"]
    short = _row("It was discovered in 1911. Its orbit lasts 76 years.")
    made = _train_data.examples_of([row, short], WordWeights(), random.Random(0), cuts=(1, 2))
    truncated = [(ex.row_index, ex.utilized) for ex in made if ex.kind == _train_data.TRUNCATED]
    # cut to one sentence: both rows (each has more than one); cut to two: only the three-sentence answer,
    # which keeps the chunks of its first two sentences and loses the third's.
    assert truncated == [(0, [True, False, False]), (1, [True, False, False]), (0, [True, True, False])]


@pytest.mark.parametrize("sentence_keys", [True, False])
def test_a_first_words_copy_uses_a_chunk_only_for_a_word_beyond_the_query(sentence_keys: bool) -> None:
    row = _row("Ada Brandt discovered it in 1911. Its orbit lasts 76 years.", sentence_keys)
    # "Ada" is in chunk 0's used sentence and not in the query; chunk 1 holds none of the three words
    assert _train_data.prefix_word_uses(row, "Ada Brandt discovered") == [True, False, False]
    # only the question's words: draws on nothing
    assert _train_data.prefix_word_uses(row, "The Foo comet") == [False, False, False]


def test_monotonic_constraints_raise_on_evidence_and_lower_on_its_rank_and_gap() -> None:
    from ctxutil_otel.judges._learned_features import FEATURE_NAMES

    signs = _train_models.monotonic(("support", "q_bm25"))
    assert len(signs) == len(FEATURE_NAMES)
    named = {name: sign for name, sign in zip(FEATURE_NAMES, signs, strict=True) if sign}
    assert named == {
        "support": 1,
        "q_bm25": 1,
        "support_rank": -1,
        "support_gap": -1,
        "q_bm25_rank": -1,
        "q_bm25_gap": -1,
    }
    # Every evidence feature the trainer constrains exists (a renamed feature would silently go free).
    for name in (*_train_models.RELEVANCE_EVIDENCE, *_train_models.USE_EVIDENCE):
        assert name in FEATURE_NAMES


def test_leaving_one_subset_out_needs_two_subsets(tmp_path: Path) -> None:
    rows = [row for row in load_sample() if row["subset"] == "covidqa"][:6]
    path = tmp_path / "one_subset.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    with pytest.raises(SystemExit, match=r"--folds-by subset: .* 1 subset \(covidqa\); .* at least 2"):
        train_learned.main(
            ["--train", str(path), "--out", str(tmp_path / "m.json"), "--folds-by", "subset", *SMALL]
        )
