"""Batch input that meets people where they are (issue 9 items 4 and 11, issue 10 item 9).

Every case here failed before: the CLI ignored ``CTXUTIL_JUDGE*``; Ragas and DeepEval files were refused
with misleading messages; a truncated line was reported at column 1; ``bench`` on unlabelled data printed
an empty table; ``evaluate | head`` ended in a traceback; a deeply nested line or a lone surrogate stopped
the run. The judge server is the real ``openai`` client against the local OpenAI-compatible test server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxutil_otel.cli import main
from ctxutil_otel.data import sample_path
from tests.support.openai_server import OpenAICompatServer, verdict_handler

from .conftest import run_cli

ROW = {
    "query": "what is green tea",
    "retrieved_content": ["Green tea is a tea made from unoxidised leaves.", "Paris is in France."],
    "actual_output": "Green tea is made from unoxidised leaves.",
}


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def judge_server() -> Iterator[OpenAICompatServer]:
    with OpenAICompatServer(verdict_handler()) as server:
        yield server


def test_ctxutil_judge_variables_choose_the_batch_judge(
    tmp_path: Path,
    judge_server: OpenAICompatServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CTXUTIL_JUDGE", "openai")
    monkeypatch.setenv("CTXUTIL_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("CTXUTIL_JUDGE_API_KEY", "sk-test-batch")
    data = write_lines(tmp_path / "d.jsonl", json.dumps(ROW), json.dumps(ROW))
    assert main(["evaluate", str(data), "--no-progress"]) == 0
    assert len(judge_server.requests) == 2  # both lines reached the endpoint the variables name
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["judge_name"] for r in records} == {"openai"}


def test_an_option_given_wins_over_its_variable(
    tmp_path: Path, judge_server: OpenAICompatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXUTIL_JUDGE", "openai")
    monkeypatch.setenv("CTXUTIL_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("CTXUTIL_THRESHOLD", "0.9")
    data = write_lines(tmp_path / "d.jsonl", json.dumps(ROW))
    out = tmp_path / "out.jsonl"
    assert main(["evaluate", str(data), "--judge", "lexical", "--out", str(out), "--no-progress"]) == 0
    record = json.loads(out.read_text())
    assert judge_server.requests == []
    assert record["judge_name"] == "lexical" and record["threshold"] == 0.9  # the variable still applies


def test_an_invalid_variable_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CTXUTIL_THRESHOLD", "2")
    status = main(["evaluate", str(write_lines(tmp_path / "d.jsonl", json.dumps(ROW))), "--no-progress"])
    assert status == 2 and "CTXUTIL_THRESHOLD" in capsys.readouterr().err


@pytest.mark.parametrize(
    "names",
    [
        ("question", "contexts", "answer"),  # Ragas 0.1
        ("user_input", "retrieved_contexts", "response"),  # Ragas 0.2+
        ("input", "retrieval_context", "actual_output"),  # DeepEval
    ],
)
def test_ragas_and_deepeval_field_names_are_read(tmp_path: Path, names: tuple[str, str, str]) -> None:
    row = dict(zip(names, (ROW["query"], ROW["retrieved_content"], ROW["actual_output"]), strict=True))
    data = write_lines(tmp_path / "d.jsonl", json.dumps({**row, "ground_truth": "ignored"}))
    out = tmp_path / "out.jsonl"
    assert main(["evaluate", str(data), "--out", str(out), "--no-progress"]) == 0
    record = json.loads(out.read_text())
    assert record["signals"]["total_chunks"] == 2 and record["label"] in {"pass", "fail"}


def test_missing_and_doubled_fields_say_so(tmp_path: Path) -> None:
    no_answer = {k: v for k, v in ROW.items() if k != "actual_output"}
    data = write_lines(
        tmp_path / "d.jsonl",
        json.dumps(no_answer),
        json.dumps({**ROW, "question": "another question"}),
        json.dumps({**ROW, "retrieved_content": None}),
        json.dumps(ROW),
    )
    proc = run_cli("evaluate", str(data), "--out", str(tmp_path / "o.jsonl"), "--no-progress")
    assert proc.returncode == 1
    assert f"{data}:1: actual_output: missing (a line names it one of: actual_output, answer, response)" in (
        proc.stderr
    )
    assert f"{data}:2: query: given twice, as 'query' and 'question'; keep one" in proc.stderr
    assert f"{data}:3: retrieved_content:" in proc.stderr and "NoneType" in proc.stderr
    assert "evaluated 1 lines (3 unreadable)" in proc.stderr


def test_json_errors_name_the_column_where_reading_stopped(tmp_path: Path) -> None:
    whole = json.dumps(ROW)
    truncated = whole[: whole.index(", ") + 1]  # cut after the first field's comma
    data = write_lines(tmp_path / "d.jsonl", truncated, whole)
    proc = run_cli("evaluate", str(data), "--out", str(tmp_path / "o.jsonl"), "--no-progress")
    line = next(x for x in proc.stderr.splitlines() if x.startswith(f"{data}:1:"))
    assert line.endswith(f"at column {len(truncated) + 1}")  # where the next field should start


def test_deep_nesting_and_lone_surrogates_are_bad_lines_and_the_rest_continue(tmp_path: Path) -> None:
    deep = '{"query": ' + "[" * 100_000 + "]" * 100_000 + "}"
    surrogate = json.dumps(ROW).replace("Paris", "Par\\ud800is")
    data = write_lines(tmp_path / "d.jsonl", json.dumps(ROW), deep, surrogate, json.dumps(ROW))
    out = tmp_path / "o.jsonl"
    proc = run_cli("evaluate", str(data), "--out", str(out), "--no-progress")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{data}:2: invalid JSON (nested too deeply to read)" in proc.stderr
    assert f"{data}:3: retrieved_content[1]: not valid Unicode (lone surrogate U+D800" in proc.stderr
    assert [json.loads(x)["line"] for x in out.read_text().splitlines()] == [1, 4]
    assert "evaluated 2 lines (2 unreadable)" in proc.stderr


def test_bench_without_labels_says_so_and_fails(tmp_path: Path) -> None:
    data = write_lines(tmp_path / "d.jsonl", json.dumps(ROW), json.dumps(ROW))
    proc = run_cli("bench", str(data))
    assert proc.returncode == 2
    assert "no line has labels" in proc.stderr and "chunk_labels and expected_score" in proc.stderr
    assert "rmse" not in proc.stdout  # no empty table


def test_a_closed_stdout_ends_quietly() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxutil_otel.cli", "evaluate", sample_path(), "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # what `| head -1` does
    stderr = proc.stderr.read()
    status = proc.wait(timeout=120)
    assert json.loads(first)["line"] == 1
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr
    assert status == 141


def test_summary_shows_pooled_utilization_failures_and_tokens(
    tmp_path: Path, judge_server: OpenAICompatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-batch")
    monkeypatch.setenv("CTXUTIL_JUDGE_API_KEY", "sk-test-batch")
    data = write_lines(tmp_path / "d.jsonl", json.dumps(ROW), json.dumps(ROW))
    base = ["--judge", "openai", "--base-url", judge_server.base_url, "--no-progress"]
    proc = run_cli("evaluate", str(data), "--out", str(tmp_path / "o.jsonl"), *base)
    records = [json.loads(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    relevant = sum(r["signals"]["total_relevant_chunks"] for r in records)
    utilized = sum(r["signals"]["utilized_chunks"] for r in records)
    assert relevant > 0
    assert f"pooled utilization {utilized / relevant:.3f} ({utilized} of {relevant} relevant chunks)" in (
        proc.stderr
    )
    tokens_in = sum(r["usage"]["input_tokens"] for r in records)
    tokens_out = sum(r["usage"]["output_tokens"] for r in records)
    assert tokens_in > 0 and f"judge tokens: {tokens_in} input, {tokens_out} output" in proc.stderr

    # A judge endpoint that refuses: failures by error_type.
    failing = run_cli(
        "evaluate", str(data), "--judge", "openai", "--base-url", "http://127.0.0.1:9/v1", "--no-progress"
    )
    assert "failures: connection=2" in failing.stderr and failing.returncode == 1


def test_bench_json_has_judge_token_totals(
    tmp_path: Path, judge_server: OpenAICompatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXUTIL_JUDGE_API_KEY", "sk-test-batch")
    labelled = {
        **ROW,
        "chunk_labels": [{"relevant": True, "utilized": True}, {"relevant": False, "utilized": False}],
        "expected_score": 1.0,
    }
    data = write_lines(tmp_path / "d.jsonl", json.dumps(labelled))
    proc = run_cli("bench", str(data), "--judge", "openai", "--base-url", judge_server.base_url, "--json")
    report = json.loads(proc.stdout)
    assert report["judge_input_tokens"] > 0 and report["judge_output_tokens"] > 0
