"""Batch files as people write them (issue 23 item 7): a UTF-8 byte-order mark opening the file (Windows
editors, Excel's "CSV UTF-8" turned JSONL) and integer ids. Both failed before: line 1 was refused as
invalid JSON, and an integer ``id`` became ``item_id: null`` in the results. The lexical judge needs no
server."""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path

import pytest

from ctxutil_otel.cli import main

ROW = {
    "query": "what is green tea",
    "retrieved_content": ["Green tea is a tea made from unoxidised leaves.", "Paris is in France."],
    "actual_output": "Green tea is made from unoxidised leaves.",
}


def _results(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_a_byte_order_mark_on_line_one_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "bom.jsonl"
    data.write_bytes(codecs.BOM_UTF8 + (json.dumps(ROW) + "\n" + json.dumps(ROW) + "\n").encode("utf-8"))
    assert main(["evaluate", str(data), "--judge", "lexical", "--no-progress"]) == 0
    assert [r["line"] for r in _results(capsys)] == [1, 2]


def test_a_byte_order_mark_after_line_one_is_still_a_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "bom2.jsonl"
    data.write_bytes((json.dumps(ROW) + "\n").encode() + codecs.BOM_UTF8 + (json.dumps(ROW) + "\n").encode())
    assert main(["evaluate", str(data), "--judge", "lexical", "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert f"{data}:2: invalid JSON" in captured.err


def test_string_and_integer_ids_reach_the_result_as_item_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{**ROW, "id": "q-1"}, {**ROW, "id": 42}, {**ROW, "id": None}, ROW, {**ROW, "id": "x" * 300}]
    data = tmp_path / "ids.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["evaluate", str(data), "--judge", "lexical", "--no-progress"]) == 0
    assert [r["item_id"] for r in _results(capsys)] == ["q-1", "42", None, None, "x" * 255 + "…"]


def test_an_id_of_another_type_is_a_bad_line_naming_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "id": 1.5, true or ["x"] was scored with item_id null and no message, while record_interaction
    # refuses such an id (dropped, a WARNING naming interaction_id). Both paths now take one rule.
    rows = [{**ROW, "id": 1.5}, {**ROW, "id": True}, {**ROW, "id": ["x"]}, {**ROW, "id": 7}]
    data = tmp_path / "bad_ids.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["evaluate", str(data), "--judge", "lexical", "--no-progress"]) == 1
    captured = capsys.readouterr()
    assert [json.loads(line)["item_id"] for line in captured.out.splitlines()] == ["7"]
    for number, got in ((1, "number"), (2, "boolean"), (3, "array")):
        assert f"{data}:{number}: id: must be a string, an integer or null, got {got}" in captured.err


def test_the_output_field_list_in_batch_md_is_the_results_fields() -> None:
    # It omitted item_id (and said ``id`` reached the result under its own name).
    from ctxutil_otel.metric import MetricEvaluationResult

    page = (Path(__file__).resolve().parents[2] / "docs" / "batch.md").read_text(encoding="utf-8")
    listing = page[page.index("`evaluate` writes one JSON result per line (") :].split(")")[0]
    named = set(re.findall(r"`([a-z_]+)`", listing)) - {"evaluate", "chunk_breakdown"}
    assert named == {"line", *MetricEvaluationResult.model_fields}
