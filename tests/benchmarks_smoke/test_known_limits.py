"""benchmarks/known_limits.py runs and prints the figures docs/judges.md quotes (Known limits)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import known_limits  # noqa: E402  # a benchmarks/ module, importable once its folder is on the path

from ctxutil_otel.cli._perturb_rows import REFUSAL_FORMS  # noqa: E402
from ctxutil_otel.data import load_sample  # noqa: E402


def _row(sentence_keys: list[str]) -> dict[str, object]:
    return {
        "query": "What does green tea contain?",
        "actual_output": "Catechins and theanine.",
        "retrieved_content": ["Green tea contains catechins.", "It also holds theanine.", "Paris is big."],
        "chunk_labels": [
            {"relevant": True, "utilized": True},
            {"relevant": True, "utilized": True},
            {"relevant": False, "utilized": False},
        ],
        "documents_sentences": [
            [["0a", "Green tea contains catechins."]],
            [["1a", "It also holds theanine."]],
            [["2a", "Paris is big."]],
        ],
        "relevant_sentence_keys": sentence_keys,
    }


def test_a_partial_answer_is_the_first_relevant_chunks_relevant_sentences() -> None:
    assert known_limits.partial_answer(_row(["0a", "1a"])) == ("Green tea contains catechins.", 2)
    # fewer than two labelled-relevant chunks, or no relevant sentence in the first: no partial answer
    one = _row(["0a"])
    one["chunk_labels"] = [{"relevant": True, "utilized": True}] + [
        {"relevant": False, "utilized": False}
    ] * 2
    assert known_limits.partial_answer(one) is None
    assert known_limits.partial_answer(_row(["1a"])) is None


def test_it_prints_every_figure_for_both_judges(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps(_row(["0a", "1a"])) + "\n", encoding="utf-8")
    assert known_limits.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"partial answers \(rows\.jsonl, 1 rows\): right about 0\.500; learned [0-9.]+, lexical", out
    )
    scored = len(load_sample())
    for judge in ("learned", "lexical"):
        assert re.search(
            rf"{judge}, bundled sample: an empty answer leaves \d+ of \d+ scored rows unscored", out
        )
    assert len(re.findall(r"refusal '.*'|refusal \".*\"", out)) == 2 * len(REFUSAL_FORMS)
    assert re.search(r"the query as the answer, models alone: some chunk used on \d+ of \d+ scored rows", out)
    assert all(int(n) <= scored for n in re.findall(r"pass \d+ of (\d+)", out))
