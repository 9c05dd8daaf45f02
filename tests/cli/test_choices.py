"""The commands' enumerated options take their values in any case, surrounding blanks ignored, as the
settings' variables do (docs/settings.md: ``CTXUTIL_JUDGE=Lexical`` is ``lexical``). ``--judge LEXICAL``
was refused by argparse ("invalid choice")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxutil_otel.cli import build_parser, main


@pytest.mark.parametrize(
    ("argv", "dest", "expected"),
    [
        (["demo", "--judge", "LEXICAL"], "judge", "lexical"),
        (["evaluate", "x.jsonl", "--judge", " Lexical "], "judge", "lexical"),
        (["evaluate", "x.jsonl", "--mode", "FAST"], "mode", "fast"),
        (["bench", "--data", "Sample"], "data", "sample"),
        (
            ["bench", "--data", "seed", "--perturb", "SWAP", "--perturb", "truncate "],
            "perturb",
            ["swap", "truncate"],
        ),
    ],
)
def test_enumerated_options_take_any_case(argv: list[str], dest: str, expected: object) -> None:
    assert getattr(build_parser().parse_args(argv), dest) == expected


def test_an_unknown_value_is_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["demo", "--judge", "LEXICON"])
    assert exited.value.code == 2
    assert "invalid choice: 'lexicon'" in capsys.readouterr().err


def test_evaluate_runs_with_an_upper_case_judge(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    row = {
        "query": "what is green tea",
        "retrieved_content": ["Green tea is a tea made from unoxidised leaves.", "Paris is in France."],
        "actual_output": "Green tea is made from unoxidised leaves.",
    }
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    assert main(["evaluate", str(data), "--judge", "LEXICAL", "--no-progress"]) == 0
    (result,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert result["score"] is not None
