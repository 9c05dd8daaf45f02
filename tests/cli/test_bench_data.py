"""``ctxutil-otel bench --data NAME``: the bundled labelled sets by name; the predicting-the-mean baseline."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxutil_otel.cli import main
from ctxutil_otel.data import DATASETS, dataset_path, load_dataset


@pytest.mark.parametrize("name", ["seed", "design"])
def test_bench_data_reads_the_bundled_set(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--data", name, "--judge", "lexical", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    rows = load_dataset(name)
    assert record["n"] == len(rows) and record["file"] == dataset_path(name)
    assert set(record["per_subset"]) == {row["subset"] for row in rows}
    expected = [row["expected_score"] for row in rows if row["expected_score"] is not None]
    mean = sum(expected) / len(expected)
    baseline = math.sqrt(sum((e - mean) ** 2 for e in expected) / len(expected))
    assert record["rmse_predicting_mean"] == pytest.approx(baseline)


def test_bench_table_fits_long_subset_names_and_prints_the_baseline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--data", "seed", "--judge", "lexical"]) == 0
    out = capsys.readouterr().out
    rows = [
        line for line in out.splitlines() if line.startswith(("physics_chemistry ", "overall ", "subset "))
    ]
    assert len(rows) == 3 and len({len(line) for line in rows}) == 1, rows  # columns line up
    assert "predicting the mean expected score for every row: rmse 0." in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bench"], "one of the arguments FILE.jsonl --data is required"),
        (["bench", "x.jsonl", "--data", "seed"], "not allowed with argument"),
        (["bench", "--data", "nope"], "invalid choice: 'nope'"),
    ],
)
def test_bench_needs_exactly_one_source(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_dataset_path_names_the_sets_it_has() -> None:
    assert set(DATASETS) == {"sample", "seed", "design"}
    with pytest.raises(ValueError, match="one of: sample, seed, design"):
        dataset_path("seeds")


@pytest.mark.parametrize(
    ("command", "how"),
    [("bench", "option"), ("evaluate", "option"), ("bench", "variable")],
)
def test_an_explicit_semantic_judge_without_its_extra_is_refused_not_replaced(
    command: str, how: str, tmp_path: Path
) -> None:
    # `bench --judge semantic` without the extra measured the learned judge instead (exit 0, the default
    # judge's fallback warning): a comparison of judges silently compared another one. Only the default
    # falls back; a judge the user names is refused before any row is judged, naming the extra.
    code = (
        "import sys\n"
        "for name in ('tokenizers', 'safetensors'): sys.modules[name] = None\n"
        "from ctxutil_otel.cli import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    args = [command, dataset_path("seed")] + (["--judge", "semantic"] if how == "option" else [])
    if command == "evaluate":
        args += ["--out", str(tmp_path / "out.jsonl")]
    env = {**os.environ, "CTXUTIL_JUDGE": "semantic"} if how == "variable" else dict(os.environ)
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "pip install 'ctxutil-otel[semantic]'" in done.stderr
    assert "judging with 'learned'" not in done.stderr


def test_the_default_judge_still_falls_back_to_learned_without_the_extra() -> None:
    code = (
        "import sys\n"
        "for name in ('tokenizers', 'safetensors'): sys.modules[name] = None\n"
        "from ctxutil_otel.cli import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CTXUTIL_JUDGE"}
    done = subprocess.run(
        [sys.executable, "-c", code, "bench", "--data", "seed", "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["judge"] == "learned"
    assert "judging with 'learned'" in done.stderr
