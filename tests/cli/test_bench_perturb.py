"""``ctxutil-otel bench --perturb`` and ``--plot``: the perturbations, the drift report, the picture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxutil_otel import DatasetItem
from ctxutil_otel.cli import main
from ctxutil_otel.cli._perturb import perturb
from ctxutil_otel.cli._plot import roc_points
from ctxutil_otel.data import sample_path

ITEMS = [
    DatasetItem(
        query=f"q{i}",
        actual_output=f"Answer {i} first. Then more {i}.",
        retrieved_content=[f"c{i}", "x", "y"],
    )
    for i in range(7)
]


def test_swap_gives_every_row_another_rows_answer_deterministically() -> None:
    swapped = perturb(ITEMS, "swap", seed=3)
    assert all(s.actual_output != o.actual_output for s, o in zip(swapped, ITEMS, strict=True))
    assert sorted(s.actual_output for s in swapped) == sorted(o.actual_output for o in ITEMS)
    assert [s.query for s in swapped] == [o.query for o in ITEMS]
    assert perturb(ITEMS, "swap", seed=3) == swapped
    assert perturb(ITEMS, "swap", seed=4) != swapped


def test_offtopic_appends_one_chunk_of_another_row() -> None:
    items = [*ITEMS, DatasetItem(query="q", actual_output="a", retrieved_content=[])]
    appended = perturb(items, "offtopic", seed=2)
    for i, (new, old) in enumerate(zip(appended, items, strict=True)):
        assert new.retrieved_content[: len(old.retrieved_content)] == old.retrieved_content
        (extra,) = new.retrieved_content[len(old.retrieved_content) :]
        assert extra not in old.retrieved_content
        assert any(extra in o.retrieved_content for j, o in enumerate(items) if j != i)
    assert perturb(items, "offtopic", seed=2) == appended
    # Rows whose chunks are all among this row's give nothing to append: fewer, never a hang.
    same = [DatasetItem(query=f"q{i}", actual_output="a", retrieved_content=["x"]) for i in range(3)]
    assert perturb(same, "offtopic") == same


def test_truncate_keeps_the_first_sentence_and_shuffle_keeps_the_chunks() -> None:
    assert [t.actual_output for t in perturb(ITEMS, "truncate")] == [f"Answer {i} first." for i in range(7)]
    shuffled = perturb(ITEMS, "shuffle", seed=1)
    assert all(
        sorted(s.retrieved_content) == sorted(o.retrieved_content)
        for s, o in zip(shuffled, ITEMS, strict=True)
    )
    assert any(s.retrieved_content != o.retrieved_content for s, o in zip(shuffled, ITEMS, strict=True))
    with pytest.raises(ValueError, match="--perturb"):
        perturb(ITEMS, "rotate")


@pytest.mark.parametrize("judge", ["learned", "lexical"])
def test_bench_perturb_reports_original_and_perturbed_side_by_side(
    judge: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["bench", sample_path(), "--limit", "60", "--judge", judge, "--json"]
    kinds = ["swap", "shuffle", "truncate", "offtopic"]
    assert main([*args, *(a for kind in kinds for a in ("--perturb", kind))]) == 0
    report = json.loads(capsys.readouterr().out)
    drift = {d["perturbation"]: d for d in report["drift"]}
    assert list(drift) == kinds
    for d in drift.values():
        assert d["rows"] == 60 and d["errors_perturbed"] == 0
        assert d["pooled_original"] == pytest.approx(report["pooled_predicted"])
    # Answers from other rows use (almost) none of the context; reordering chunks changes nothing.
    assert drift["swap"]["pooled_perturbed"] < 0.2 < drift["swap"]["pooled_original"]
    assert drift["shuffle"]["pooled_perturbed"] == pytest.approx(
        drift["shuffle"]["pooled_original"], abs=0.01
    )
    assert drift["truncate"]["pooled_perturbed"] < drift["truncate"]["pooled_original"]
    # Nearly every swapped answer changes its row's score; an off-topic chunk appended changes few
    # (DESIGN.md: irrelevant chunks neither lower nor raise the score).
    assert drift["swap"]["scores_changed"] > 0.8
    assert drift["offtopic"]["scores_changed"] < 0.15
    assert drift["offtopic"]["mean_score_perturbed"] == pytest.approx(
        drift["offtopic"]["mean_score_original"], abs=0.03
    )


def test_bench_perturb_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", sample_path(), "--limit", "20", "--perturb", "swap"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("perturb ") for line in lines)
    swap = next(line for line in lines if line.startswith("swap "))
    assert swap.split()[1] == "20" and "->" in swap


def test_bench_plot_writes_a_png(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "bench.png"
    assert main(["bench", sample_path(), "--limit", "80", "--plot", str(target)]) == 0
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"plot written to {target}" in capsys.readouterr().out


def test_bench_plot_without_matplotlib_names_the_extra(tmp_path: Path) -> None:
    # matplotlib is installed here; a None entry in sys.modules makes its import fail as if it were not.
    code = (
        "import sys; sys.modules['matplotlib'] = None; from ctxutil_otel.cli import main; "
        f"sys.exit(main(['bench', {sample_path()!r}, '--limit', '3', '--plot', {str(tmp_path / 'x.png')!r}]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "'plot' extra" in proc.stderr and "matplotlib" in proc.stderr
    assert not (tmp_path / "x.png").exists()


def test_roc_points_run_from_origin_to_one() -> None:
    points = roc_points([0.1, 0.2], [0.3, 0.9])
    assert points[0] == (0.0, 0.0) and points[-1] == (1.0, 1.0)
    assert (0.0, 1.0) in points  # a perfect separation passes through the top-left corner


def test_swap_on_one_row_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # With one row there is no other answer to take: it used to keep the row's own answer and print an
    # unchanged pooled utilization, as if the judge had failed the drift check.
    one = tmp_path / "one.jsonl"
    one.write_text(Path(sample_path()).read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    assert main(["bench", str(one), "--perturb", "swap"]) == 2
    err = capsys.readouterr().err
    assert "--perturb swap needs at least 2 rows" in err and "has 1" in err
    with pytest.raises(ValueError, match="at least 2 rows"):
        perturb([DatasetItem(query="q", actual_output="a", retrieved_content=["c"])], "swap")


def test_plot_into_a_missing_directory_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no" / "such" / "x.png"
    assert main(["bench", sample_path(), "--limit", "3", "--plot", str(target)]) == 2
    captured = capsys.readouterr()
    assert f"--plot: no directory {target.parent}" in captured.err
    assert "bench " not in captured.out  # refused before any row was judged
