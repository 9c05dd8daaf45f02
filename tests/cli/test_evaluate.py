"""``ctxutil-otel evaluate`` on the bundled sample and on a file with broken lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxutil_otel.cli import main
from ctxutil_otel.data import load_sample, sample_path

from .conftest import run_cli


def test_evaluate_bundled_sample_writes_one_result_per_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.jsonl"
    status = main(["evaluate", sample_path(), "--out", str(out), "--no-progress"])
    assert status == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    rows = load_sample()
    assert len(records) == len(rows)
    assert [r["line"] for r in records] == list(range(1, len(rows) + 1))
    assert all(r["label"] in {"pass", "fail", "not_applicable"} for r in records)
    for record, row in zip(records, rows, strict=True):
        assert record["item_id"] == row["id"]
        assert record["signals"]["total_chunks"] == len(row["retrieved_content"])
    summary = capsys.readouterr().err
    scored = [r["score"] for r in records if r["score"] is not None]
    assert f"mean score {sum(scored) / len(scored):.3f}" in summary
    assert "labels: pass=" in summary


def test_broken_lines_are_reported_and_the_rest_continue(tmp_path: Path) -> None:
    good = {
        "query": "what is green tea",
        "actual_output": "green tea is tea",
        "retrieved_content": ["green tea"],
    }
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({"query": "  ", "actual_output": "a", "retrieved_content": []}),
        json.dumps({"query": "q", "actual_output": "a", "retrieved_content": ["ok", None]}),
        "[1, 2]",
        "",
        json.dumps({**good, "extra_field": 1}),
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out.jsonl"
    proc = run_cli("evaluate", str(data), "--out", str(out), "--no-progress")
    assert proc.returncode == 1
    assert f"{data}:2: invalid JSON" in proc.stderr
    assert f"{data}:3: query" in proc.stderr
    assert f"{data}:4: retrieved_content" in proc.stderr and "retrieved_content[1]" in proc.stderr
    assert f"{data}:5: expected a JSON object" in proc.stderr
    assert "4 unreadable" in proc.stderr
    assert [json.loads(x)["line"] for x in out.read_text().splitlines()] == [1, 7]


def test_missing_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(tmp_path / "nope.jsonl"), "--no-progress"]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_a_non_utf8_line_is_reported_and_the_rest_continue(tmp_path: Path) -> None:
    good = json.dumps(
        {"query": "green tea", "actual_output": "green tea", "retrieved_content": ["green tea"]}
    )
    data = tmp_path / "latin1.jsonl"
    data.write_bytes(good.encode() + b"\n" + '{"query": "caf\xe9"}'.encode("latin-1") + b"\n" + good.encode())
    out = tmp_path / "out.jsonl"
    status = main(["evaluate", str(data), "--out", str(out), "--no-progress"])
    assert status == 1
    assert [json.loads(x)["line"] for x in out.read_text().splitlines()] == [1, 3]


def test_out_must_not_overwrite_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"query": "q", "actual_output": "a", "retrieved_content": ["a"]}) + "\n")
    before = data.read_text()
    assert main(["evaluate", str(data), "--out", str(data), "--no-progress"]) == 2
    assert data.read_text() == before
    assert "--out names the input file" in capsys.readouterr().err


def test_unwritable_out_fails_before_evaluating(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["evaluate", sample_path(), "--out", str(tmp_path / "no" / "dir.jsonl"), "--no-progress"]) == 2
    )
    err = capsys.readouterr().err
    assert "--out" in err and "evaluated" not in err
