"""SemanticJudge: relevance from the query alone, the non-answer rule, DESIGN.md's examples, the shipped
model's fingerprint, pickling for the process worker, the extra's error, model-file checks."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pickle
import re
import subprocess
import sys
from importlib import resources
from typing import Any

import pytest

from ctxutil_otel import ContextualUtilization, DatasetItem, Settings
from ctxutil_otel.cli._perturb_rows import ECHO_FORMS, REFUSAL_FORMS, refuse
from ctxutil_otel.data import load_sample
from ctxutil_otel.judges import Judge, ModelFileError, SemanticJudge
from ctxutil_otel.judges._from_settings import build_judge
from ctxutil_otel.judges._non_answer import non_answer
from ctxutil_otel.judges._semantic_model import load_semantic_model, shipped_semantic_model

# sha256 of the shipped model's verdicts and probabilities (rounded to 4 places: the embeddings are float32
# sums) on the bundled sample. Changes only when the model or the features change: retrain, check
# docs/judges.md, then update.
SAMPLE_FINGERPRINT = "7836410cdf73b1c7d3e2e4cae4d634701b710ee662413e7db2381709a002a229"


def _document() -> dict[str, Any]:
    text = resources.files("ctxutil_otel.data").joinpath("semantic_judge.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _design_rows() -> list[dict[str, Any]]:
    text = resources.files("ctxutil_otel.data").joinpath("design_examples.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def sample_fingerprint() -> str:
    judge = SemanticJudge()
    digest = hashlib.sha256()
    for row in load_sample():
        rel, use = judge.probabilities(row["query"], row["actual_output"], row["retrieved_content"])
        verdicts = judge.judge_sync(
            row["query"], row["actual_output"], row["retrieved_content"], reasons=False
        )
        digest.update(
            json.dumps(
                [
                    [round(p, 4) for p in rel],
                    [round(p, 4) for p in use],
                    [(v.is_relevant, v.is_utilized) for v in verdicts],
                ]
            ).encode()
        )
    return digest.hexdigest()


def test_semantic_judge_is_a_judge_and_names_its_model() -> None:
    judge = SemanticJudge()
    assert isinstance(judge, Judge)
    assert judge.name == "semantic"
    assert judge.model == shipped_semantic_model().provenance["model_id"]
    assert isinstance(build_judge(Settings(judge="semantic")), SemanticJudge)


def test_shipped_model_carries_its_provenance() -> None:
    provenance = _document()["provenance"]
    for key in ("training_data", "command", "seed", "base_model", "licence", "model_id"):
        assert provenance[key], key
    assert "train_semantic.py" in provenance["command"]
    assert "wordllama" in provenance["base_model"].lower()


def test_shipped_model_outputs_on_the_bundled_sample_match_the_recorded_fingerprint() -> None:
    assert sample_fingerprint() == SAMPLE_FINGERPRINT


def test_fingerprint_does_not_depend_on_the_hash_seed() -> None:
    code = "from tests.judges.test_semantic_judge import sample_fingerprint; print(sample_fingerprint())"
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
        )
        outputs.add(done.stdout.strip())
    assert outputs == {SAMPLE_FINGERPRINT}


# DESIGN.md's examples the shipped model misses (xfail strict: one that starts passing fails the run until its
# entry is deleted), with what it says instead (R relevant, U utilized, - neither; docs/judges.md).
DESIGN_MISSES = {
    "design-green-tea": "RU RU R R: 'Tea originated in China' reads relevant (0.5, not 0.67)",
    "design-python": "RU - -: the Guido van Rossum and readability chunks read irrelevant (score still 1.0)",
    "design-boiling-point": "RU RU R: the ice-cream chunk (freezing point of water) reads relevant (0.67)",
    "design-exercise": "RU RU R R: the gyms chunk (shares 'exercise') reads relevant (0.5)",
}


def _design_cases() -> list[Any]:
    return [
        pytest.param(
            row,
            id=row["id"],
            marks=[pytest.mark.xfail(strict=True, reason=DESIGN_MISSES[row["id"]])]
            if row["id"] in DESIGN_MISSES
            else [],
        )
        for row in _design_rows()
    ]


@pytest.mark.parametrize("row", _design_cases())
def test_design_examples_get_exactly_the_verdicts_design_md_gives(row: dict[str, Any]) -> None:
    verdicts = SemanticJudge().judge_sync(row["query"], row["actual_output"], row["retrieved_content"])
    got = [(v.is_relevant, v.is_relevant and v.is_utilized) for v in sorted(verdicts, key=lambda v: v.index)]
    want = [(lab["relevant"], lab["relevant"] and lab["utilized"]) for lab in row["chunk_labels"]]
    assert got == want, [v.reason for v in verdicts]


def test_relevance_never_reads_the_answer() -> None:
    # Decision 3 of issue 26: the answer cannot make a chunk relevant or irrelevant.
    judge = SemanticJudge()
    for row in load_sample()[:40]:
        first, _ = judge.probabilities(row["query"], row["actual_output"], row["retrieved_content"])
        other, _ = judge.probabilities(
            row["query"], "Bananas are yellow. Paris is in France.", row["retrieved_content"]
        )
        assert first == other


def test_an_answer_copied_from_an_off_topic_chunk_does_not_make_it_relevant() -> None:
    row = _design_rows()[0]  # green tea
    off_topic = "The Treaty of Westphalia ended the Thirty Years' War in 1648."
    chunks = [*row["retrieved_content"], off_topic]
    verdicts = SemanticJudge().judge_sync(row["query"], off_topic, chunks, reasons=False)
    assert not verdicts[-1].is_relevant
    assert not any(v.is_utilized and v.is_relevant for v in verdicts)


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "  ?! ",
        *(form(" What are the health benefits of green tea?") for form in ECHO_FORMS),
        *(refuse("What are the health benefits of green tea?", k) for k in range(len(REFUSAL_FORMS))),
        "I don't know.",
        "The context does not mention the health benefits of green tea.",
    ],
)
async def test_a_non_answer_uses_no_chunk_and_relevant_context_scores_zero(answer: str) -> None:
    row = _design_rows()[0]
    metric = ContextualUtilization(judge=SemanticJudge())
    result = await metric.execute(
        DatasetItem(query=row["query"], actual_output=answer, retrieved_content=row["retrieved_content"])
    )
    assert result.score == 0.0
    assert result.signals.total_relevant_chunks >= 1


@pytest.mark.parametrize(
    ("query", "answer", "why"),
    [
        ("What is X?", "", "the answer has no words"),
        (
            "What is the capital of France?",
            "Q: What is the capital of France?",
            "the answer only restates the query",
        ),
        (
            "What is the capital of France?",
            "France? of capital the is What",
            "the answer only restates the query",
        ),
        ("Is FX affiliated with Fox?", "Yes, FX is affiliated with Fox.", ""),
        ("What is the largest island of the Kodiak Archipelago?", "Kodiak Island.", ""),
        (
            "When was X founded?",
            "The passage does not provide the founding date of X.",
            "the answer declines to answer",
        ),
        ("When was X founded?", "The passage does not say. However, X opened its first office in 1901.", ""),
        ("What do the strains have?", "The strains from Colorado do not have such deletions.", ""),
    ],
)
def test_non_answer_rule(query: str, answer: str, why: str) -> None:
    assert non_answer(query, answer) == why


def test_verdicts_do_not_depend_on_the_order_of_the_chunks() -> None:
    judge = SemanticJudge()
    for row in load_sample()[:20]:
        chunks = row["retrieved_content"]
        forward = judge.judge_sync(row["query"], row["actual_output"], chunks, reasons=False)
        backward = judge.judge_sync(row["query"], row["actual_output"], chunks[::-1], reasons=False)
        n = len(chunks)
        assert [(v.is_relevant, v.is_utilized) for v in forward] == [
            (backward[n - 1 - v.index].is_relevant, backward[n - 1 - v.index].is_utilized) for v in forward
        ]


def test_reasons_say_what_the_verdict_rests_on() -> None:
    row = _design_rows()[0]
    verdicts = SemanticJudge().judge_sync(row["query"], row["actual_output"], row["retrieved_content"])
    for v in verdicts:
        assert "query similarity" in v.reason and "P(relevant)" in v.reason
    refused = SemanticJudge().judge_sync(row["query"], "I don't know.", row["retrieved_content"])
    assert any("declines to answer" in v.reason for v in refused if v.is_relevant)


def test_a_chunk_used_against_its_odds_says_it_makes_up_the_expected_count() -> None:
    # The utilized count is the expected number of used relevant chunks, rounded up from 0.2 with the
    # shipped offset: a chunk the answer likely ignored (P(used) < 0.5) may complete it, and its reason
    # must say so rather than read "used (P(used) 0.14; ...)" as if it were evidence of use. The other
    # way round, a chunk more likely used than not left outside the rounded count says so.
    judge = SemanticJudge()
    against = 0
    for row in load_sample():
        query, answer, chunks = row["query"], row["actual_output"], row["retrieved_content"]
        if non_answer(query, answer):
            continue
        _, p_use = judge.probabilities(query, answer, chunks)
        for v, p in zip(judge.judge_sync(query, answer, chunks), p_use, strict=True):
            if v.is_utilized and p < 0.5:
                against += 1
                assert "counted to make up the" in v.reason and "expected used, rounded to" in v.reason, (
                    v.reason
                )
            elif v.is_utilized:
                assert "expected used" not in v.reason, v.reason
            if v.is_relevant and not v.is_utilized and p >= 0.5:
                assert re.search(r"expected used, rounded to \d+: more likely used", v.reason), v.reason
    assert against > 0  # the sample has chunks counted in against their odds


def test_a_pickled_judge_gives_the_same_verdicts() -> None:
    # worker="process" sends the judge to its child by pickle.
    judge = SemanticJudge()
    clone = pickle.loads(pickle.dumps(judge))
    row = load_sample()[0]
    args = (row["query"], row["actual_output"], row["retrieved_content"])
    assert clone.judge_sync(*args) == judge.judge_sync(*args)


def test_without_the_extra_the_error_names_it() -> None:
    # A fresh interpreter in which the extra's packages cannot be imported (None in sys.modules blocks them).
    code = (
        "import sys\n"
        "for name in ('tokenizers', 'safetensors'): sys.modules[name] = None\n"
        "from ctxutil_otel.judges import SemanticJudge, SemanticExtraMissingError\n"
        "try:\n    SemanticJudge()\nexcept SemanticExtraMissingError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "pip install 'ctxutil-otel[semantic]'" in out


def test_model_file_checks_name_the_field() -> None:
    document = _document()
    assert load_semantic_model(document).decision.relevance_threshold > 0
    for key, value, field in (
        ("format", "ctxutil-otel-semantic-judge/0", "format"),
        ("embedding", "other", "embedding"),
        ("relevance_features", ["q_cover_global"], "relevance_features"),
        ("utilization_features", None, "utilization_features"),
    ):
        broken = copy.deepcopy(document)
        broken[key] = value
        with pytest.raises(ModelFileError, match=field):
            load_semantic_model(broken)


def test_the_default_falls_back_to_the_learned_judge_with_one_warning_without_the_extra() -> None:
    code = (
        "import logging, sys\n"
        "for name in ('tokenizers', 'safetensors'): sys.modules[name] = None\n"
        "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(message)s')\n"
        "from ctxutil_otel import ContextualUtilization, Settings\n"
        "from ctxutil_otel.judges._from_settings import build_judge\n"
        "print(ContextualUtilization().judge.name, build_judge(Settings()).name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "learned learned"
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and "pip install 'ctxutil-otel[semantic]'" in warnings[0]


def test_the_semantic_judge_named_without_the_extra_is_an_error_naming_it() -> None:
    # Only the default falls back to learned: ContextualUtilization(judge="semantic") gets the semantic
    # judge or the extra's error, as --judge semantic does.
    code = (
        "import sys\n"
        "for name in ('tokenizers', 'safetensors'): sys.modules[name] = None\n"
        "from ctxutil_otel import ContextualUtilization\n"
        "from ctxutil_otel.judges import SemanticExtraMissingError\n"
        "try:\n    ContextualUtilization(judge='semantic')\nexcept SemanticExtraMissingError as exc:\n"
        "    print('refused', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("refused") and "pip install 'ctxutil-otel[semantic]'" in out


@pytest.mark.parametrize("query", ["what is python", "What is Python?", "Who created Python?"])
def test_a_chunk_that_states_what_the_query_asks_is_relevant(query: str) -> None:
    # The interaction of the worker tests (tests/worker/conftest.py). A model that learnt the seed-style
    # training set's construction (its distractors share the query's words) called every chunk irrelevant
    # here, so the interaction was not applicable (model ...-2f576da3: P(relevant) 0.16, 0.11, 0.11).
    answer = "Python is a high-level programming language created by Guido van Rossum."
    chunks = [
        "Python is a high-level programming language.",
        "Guido van Rossum created Python.",
        "Ice cream.",
    ]
    verdicts = SemanticJudge().judge_sync(query, answer, chunks, reasons=False)
    assert verdicts[0].is_relevant and verdicts[0].is_utilized
    assert not verdicts[2].is_relevant


@pytest.mark.parametrize("where", ["query", "answer", "chunk"])
def test_a_lone_surrogate_in_any_text_is_judged_not_failed(where: str) -> None:
    # Python strings may hold lone surrogates (json.loads of "\ud800", os.fsdecode's surrogateescape); the
    # tokenizers library refuses them ("TextInputSequence must be str"), which failed the whole evaluation.
    # The other judges take them; so does this one, the surrogate read as an unknown character.
    query, answer = (
        "What are the benefits of green tea?",
        "Green tea has antioxidants that protect the heart.",
    )
    chunks = ["Green tea has antioxidants that protect the heart.", "Tea originated in China."]
    bad = "\udcff"
    if where == "query":
        query += bad
    elif where == "answer":
        answer += bad
    else:
        chunks[0] += bad
    verdicts = SemanticJudge().judge_sync(query, answer, chunks, reasons=True)
    assert verdicts[0].is_relevant and verdicts[0].is_utilized
    assert not verdicts[1].is_utilized
