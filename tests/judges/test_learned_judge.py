"""LearnedJudge: the judge contract, the shipped model's fingerprint, model-file checks, the default."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from importlib import resources
from typing import Any

import pytest

from ctxutil_otel import ContextualUtilization, DatasetItem, Settings
from ctxutil_otel.data import load_sample
from ctxutil_otel.judges import Judge, LearnedJudge, LexicalJudge
from ctxutil_otel.judges._from_settings import build_judge
from ctxutil_otel.judges._learned_decision import decide, decide_utilized, expected_used
from ctxutil_otel.judges._learned_model import ModelFileError, load_model, shipped_model

from .test_offline_judges import ANSWER, CHUNKS, QUERY

# sha256 of the shipped model's verdicts and probabilities (rounded to 9 places) on the bundled sample.
# Changes only when the model or the features change: retrain, check docs/judges.md, then update.
SAMPLE_FINGERPRINT = "12c9ab5e8d088a9d3e2a26fcc0598983574792102877820c0040654711efb859"


def _document() -> dict[str, Any]:
    text = resources.files("ctxutil_otel.data").joinpath("learned_judge.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def sample_fingerprint() -> str:
    judge = LearnedJudge()
    digest = hashlib.sha256()
    for row in load_sample():
        probs = judge.probabilities(row["query"], row["actual_output"], row["retrieved_content"])
        verdicts = judge.judge_sync(
            row["query"], row["actual_output"], row["retrieved_content"], reasons=False
        )
        digest.update(
            json.dumps(
                [
                    [round(p, 9) for p in probs.relevant],
                    [round(p, 9) for p in probs.utilized],
                    [(v.is_relevant, v.is_utilized) for v in verdicts],
                ]
            ).encode()
        )
    return digest.hexdigest()


def test_learned_judge_is_a_judge_and_names_its_model() -> None:
    judge = LearnedJudge()
    assert isinstance(judge, Judge)
    assert judge.name == "learned"
    assert judge.model == shipped_model().provenance["model_id"]
    assert "LearnedJudge(model=" in repr(judge)


def test_is_selectable_by_the_settings() -> None:
    # The default is the semantic judge (tests/judges/test_semantic_judge.py); learned stays selectable.
    assert isinstance(build_judge(Settings(judge="learned")), LearnedJudge)
    assert isinstance(ContextualUtilization(judge=LearnedJudge()).judge, LearnedJudge)
    assert isinstance(build_judge(Settings(judge="lexical")), LexicalJudge)


def test_constructors_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        LearnedJudge(None)  # type: ignore[misc]
    with pytest.raises(TypeError):
        LexicalJudge(0.3)  # type: ignore[misc]
    with pytest.raises(ValueError, match="max_text_chars"):
        LearnedJudge(max_text_chars=0)


async def test_judge_is_deterministic_and_independent_of_chunk_order() -> None:
    first = await LearnedJudge().judge(QUERY, ANSWER, CHUNKS)
    second = await LearnedJudge().judge(QUERY, ANSWER, CHUNKS)
    again = await LearnedJudge().judge(QUERY, ANSWER, list(reversed(CHUNKS)))
    assert first == second
    assert [v.index for v in first.verdicts] == [0, 1, 2, 3]
    flipped = {CHUNKS[3 - v.index]: (v.is_relevant, v.is_utilized) for v in again.verdicts}
    assert flipped == {CHUNKS[v.index]: (v.is_relevant, v.is_utilized) for v in first.verdicts}


async def test_quoted_chunks_are_utilized_and_off_topic_chunk_is_not_relevant() -> None:
    result = await LearnedJudge().judge(QUERY, ANSWER, CHUNKS)
    verdicts = result.verdicts
    assert result.usage is None
    assert verdicts[0].is_relevant and verdicts[0].is_utilized
    assert verdicts[1].is_relevant and verdicts[1].is_utilized
    assert not verdicts[2].is_relevant and not verdicts[2].is_utilized


async def test_reasons_quote_the_evidence() -> None:
    with_reasons = await LearnedJudge().judge(QUERY, ANSWER, CHUNKS)
    assert with_reasons.verdicts[0].reason.startswith("used (P(relevant) ")
    assert "'catechin'" in with_reasons.verdicts[0].reason
    assert with_reasons.verdicts[2].reason.startswith("not relevant")


async def test_an_answer_from_another_interaction_is_not_credited_to_the_chunks() -> None:
    other = "The Great Wall of China is about 21,000 kilometres long and was built over centuries."
    result = await LearnedJudge().judge(QUERY, other, CHUNKS)
    assert not any(v.is_utilized for v in result.verdicts)


async def test_an_answer_cut_to_its_first_sentence_no_longer_uses_the_chunk_of_the_second() -> None:
    whole = await LearnedJudge().judge(QUERY, ANSWER, CHUNKS)
    assert [v.is_utilized for v in whole.verdicts][:2] == [True, True]
    cut = await LearnedJudge().judge(QUERY, ANSWER.split(". ")[0] + ".", CHUNKS)
    # chunk 0 holds the first sentence; chunk 1 only the (now removed) second one
    assert [v.is_utilized for v in cut.verdicts][:2] == [True, False]


async def test_text_is_capped_at_max_text_chars() -> None:
    judge = LearnedJudge(max_text_chars=100)
    long_chunk = CHUNKS[0] + " filler" * 100_000
    capped = await judge.judge(QUERY, ANSWER, [long_chunk, CHUNKS[2]])
    direct = await judge.judge(QUERY, ANSWER, [long_chunk[:100], CHUNKS[2]])
    assert [(v.is_relevant, v.is_utilized) for v in capped.verdicts] == [
        (v.is_relevant, v.is_utilized) for v in direct.verdicts
    ]


def test_shipped_model_outputs_on_the_bundled_sample_match_the_recorded_fingerprint() -> None:
    assert sample_fingerprint() == SAMPLE_FINGERPRINT


def test_fingerprint_does_not_depend_on_the_hash_seed() -> None:
    code = "from tests.judges.test_learned_judge import sample_fingerprint; print(sample_fingerprint())"
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(proc.stdout.strip())
    assert outputs == {SAMPLE_FINGERPRINT}


def test_shipped_model_carries_its_provenance() -> None:
    provenance = _document()["provenance"]
    for key in ("model_id", "training_data", "command", "seed", "date", "word_frequencies", "trainer"):
        assert provenance.get(key), key
    assert "ragbench_train.jsonl" in provenance["training_data"]
    assert "train_learned.py" in provenance["command"]


def test_shipped_model_id_names_its_content() -> None:
    # The trainer ends the id with the sha256 of everything but the provenance: a retrained model with
    # other trees or thresholds reports another gen_ai.request.model.
    document = _document()
    body = json.dumps({k: v for k, v in document.items() if k != "provenance"}, sort_keys=True)
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:8]
    assert document["provenance"]["model_id"] == f"ctxutil-gbdt-ragbench-seed20261201-{digest}"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("format",), "other/1", "format"),
        (("features",), ["x"], "features"),
        (("decision", "relevance_threshold"), "0.5", "decision.relevance_threshold"),
        (("relevance", "link"), "softmax", "relevance.link"),
        (("relevance", "trees", 0, 0), [0, "__import__('os')", 1, 2], "relevance.trees[0][0].threshold"),
        (("relevance", "trees", 0, 0), [999, 0.5, 1, 2], "relevance.trees[0][0].feature"),
        (("relevance", "trees", 0, 0), [0, 0.5, 0, 0], "deeper than"),
        (("utilization", "trees", 0, 0), [float("nan")], "utilization.trees[0][0]"),
    ],
)
def test_a_broken_model_file_is_rejected_naming_the_field(
    path: tuple[Any, ...], value: Any, field: str
) -> None:
    document = copy.deepcopy(_document())
    target: Any = document
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ModelFileError) as caught:
        load_model(document)
    assert field in str(caught.value)


def test_a_model_file_of_another_version_says_to_retrain() -> None:
    document = copy.deepcopy(_document())
    document["format"] = "ctxutil-otel-learned-judge/1"
    with pytest.raises(ModelFileError, match=r"format: .*retrain with benchmarks/train_learned.py"):
        load_model(document)


async def test_a_loaded_model_is_used_as_given() -> None:
    document = copy.deepcopy(_document())
    document["decision"]["relevance_threshold"] = 1.0  # nothing reaches it (probabilities stay below 1)
    document["decision"]["fallback_threshold"] = 1.0  # and no fallback
    judge = LearnedJudge(learned_model=load_model(document))
    result = await judge.judge(QUERY, ANSWER, CHUNKS)
    assert not any(v.is_relevant for v in result.verdicts)
    score = await ContextualUtilization(judge=judge).execute(
        DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=CHUNKS)
    )
    assert score.score is None and score.label == "not_applicable"


def test_the_utilized_count_is_the_expected_number_of_used_relevant_chunks_rounded() -> None:
    # Three relevant chunks, one clearly drawn on: expected 0.9 + 0.2 + 0.1 = 1.2 -> one used (1/3),
    # not the typical score of a training set. A chunk that is not relevant adds nothing to the count.
    p_use = [0.9, 0.2, 0.1, 0.95]
    relevant = [True, True, True, False]
    assert expected_used(p_use, relevant) == pytest.approx(1.2)
    assert decide_utilized(1.2, p_use, relevant) == [True, False, False, False]
    # 1.5 rounds up to two (offset 0.5): the next most likely relevant chunk completes the count.
    assert decide_utilized(1.5, [0.9, 0.4, 0.2, 0.0], relevant) == [True, True, False, False]
    # The count never exceeds the relevant chunks, and never goes below zero.
    assert decide_utilized(7.0, p_use, relevant) == [True, True, True, False]
    assert decide_utilized(-1.0, p_use, relevant) == [False] * 4
    # The whole rule: relevance by the threshold, then the count.
    document = _document()
    model = load_model(document)
    got = decide(model.decision, [0.99, 0.99, 0.99, 0.0], p_use)
    assert got.relevant == relevant
    assert got.utilized == [True, False, False, False]
    assert got.expected == pytest.approx(1.2)
