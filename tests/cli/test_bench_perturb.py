"""``ctxutil-otel bench --perturb`` and ``--plot``: the perturbations, the drift report, the picture."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxutil_otel import DatasetItem
from ctxutil_otel.cli import main
from ctxutil_otel.cli._io import Line, read_items
from ctxutil_otel.cli._perturb import DriftFigures, add_offtopic, perturb
from ctxutil_otel.cli._perturb_rows import ECHO_FORMS, REFUSAL_FORMS, echo_query, refuse
from ctxutil_otel.cli._plot import roc_points
from ctxutil_otel.data import sample_path
from ctxutil_otel.judges._text import sentences, words

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


def test_batch_md_documents_every_json_key_of_the_drift_records(capsys: pytest.CaptureFixture[str]) -> None:
    # The table says "changed" and "app.rel"; the JSON keys (scores_changed, appended_relevant, ...) were
    # not written anywhere. The paragraph of docs/batch.md that starts "With `--json` the figures are in
    # `drift`" must name every key a record has, and every field a record can have.
    page = (Path(__file__).parents[2] / "docs" / "batch.md").read_text(encoding="utf-8")
    start = page.index("With `--json` the figures are in `drift`")
    documented = set(re.findall(r"`([a-z_]+)`", page[start : page.index("\n\n", start)]))
    assert (
        main(
            [
                "bench",
                sample_path(),
                "--limit",
                "4",
                "--perturb",
                "swap",
                "--perturb",
                "wrongsource",
                "--json",
            ]
        )
        == 0
    )
    records = json.loads(capsys.readouterr().out)["drift"]
    keys = {key for record in records for key in record}
    assert "scores_changed" in keys and "appended_relevant" in keys
    assert keys | set(DriftFigures.model_fields) <= documented


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
    assert "--perturb swap needs at least 2 rows" in err
    assert "1 readable row was used (unreadable or unlabelled lines are not counted)" in err
    with pytest.raises(ValueError, match="at least 2 rows"):
        perturb([DatasetItem(query="q", actual_output="a", retrieved_content=["c"])], "swap")


def test_the_refusal_counts_the_rows_used_not_the_lines_of_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The sample has 250 lines: with --limit 1 one row is used, and the message says so (it used to say
    # "the file has 1"). Likewise three lines of which two cannot be read or have no labels.
    assert main(["bench", sample_path(), "--limit", "1", "--perturb", "swap"]) == 2
    err = capsys.readouterr().err
    assert "the file has" not in err
    assert "1 readable row was used (after --limit 1; unreadable or unlabelled lines are not counted)" in err
    three = tmp_path / "three.jsonl"
    first = Path(sample_path()).read_text(encoding="utf-8").splitlines()[0]
    unlabelled = json.dumps({k: v for k, v in json.loads(first).items() if k != "chunk_labels"})
    three.write_text(f"{first}\nnot json\n{unlabelled}\n", encoding="utf-8")
    assert main(["bench", str(three), "--perturb", "pad"]) == 2
    err = capsys.readouterr().err
    assert "--perturb pad needs at least 2 rows" in err and "the file has" not in err
    assert "1 readable row was used (unreadable or unlabelled lines are not counted)" in err
    assert main(["bench", sample_path(), "--limit", "2", "--perturb", "swap", "--json"]) == 0  # 2 is enough
    assert json.loads(capsys.readouterr().out)["drift"][0]["rows"] == 2


def test_plot_into_a_missing_directory_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "no" / "such" / "x.png"
    assert main(["bench", sample_path(), "--limit", "3", "--plot", str(target)]) == 2
    captured = capsys.readouterr()
    assert f"--plot: no directory {target.parent}" in captured.err
    assert "bench " not in captured.out  # refused before any row was judged


# --- echo, wrongsource, pad ------------------------------------------------------------------------------


def _sample() -> list[DatasetItem]:
    return [line.item for line in read_items(Path(sample_path())) if isinstance(line, Line)]


# Rows whose chunks are all different and have three sentences each (the bundled sample repeats a few).
ROWS = [
    DatasetItem(
        query=f"question {i}",
        actual_output=f"Answer {i}.",
        retrieved_content=[f"Fact {i}{k} one. Fact {i}{k} two. Fact {i}{k} three." for k in range(3)],
    )
    for i in range(6)
]


def test_echo_answers_are_edits_of_the_query_that_add_no_chunk_word() -> None:
    items = _sample()
    echoed = perturb(items, "echo", seed=5)
    assert perturb(items, "echo", seed=5) == echoed
    assert perturb(items, "echo", seed=6) != echoed
    forms = set()
    for new, old in zip(echoed, items, strict=True):
        assert new.query == old.query and new.retrieved_content == old.retrieved_content
        # Never the verbatim query: the learned judge's rule already catches that one.
        assert new.actual_output != old.query
        # Every word of the answer is a word of the query, or the marker "Q" of the "Q: query" form (a
        # letter that says nothing, though a few chunks hold it as a word: "Q" in msmarco-4603's): no chunk
        # word reaches the answer except through the query.
        assert set(words(new.actual_output)) - set(words(old.query)) <= {"q"}
        if new.actual_output.startswith("Q: "):
            forms.add("Q")
        elif new.actual_output == f"{old.query} {old.query}":
            forms.add("twice")
        else:
            assert new.actual_output == " ".join(reversed(old.query.split()))
            forms.add("reversed")
    assert forms == {"Q", "twice", "reversed"}  # the seed rotates between the three documented forms


@pytest.mark.parametrize("query", ["tea", "  tea ", "a b a", "to be to", "", "why is the sky blue"])
def test_no_echo_form_gives_the_query_words_in_order(query: str) -> None:
    # "tea" reversed is "tea": the reversed form falls back to "Q: " + query whenever reversing (or, for a
    # query without words, repeating) changes nothing.
    for form in range(len(ECHO_FORMS)):
        assert echo_query(query, form).split() != query.split()
    assert echo_query("tea", 2) == "Q: tea"
    assert echo_query("why is the sky blue", 2) == "blue sky the is why"  # the others are unchanged
    assert echo_query("tea", 1) == "tea tea"
    items = [DatasetItem(query="tea", actual_output="Green tea.", retrieved_content=["Tea is green."])] * 12
    echoed = perturb(items, "echo", seed=1)
    assert {e.actual_output for e in echoed} == {"Q: tea", "tea tea"}  # never "tea" (form 2 drawn too)


def test_wrongsource_answers_with_the_chunk_offtopic_appends() -> None:
    for items in (ROWS, _sample()):
        changed = perturb(items, "wrongsource", seed=2)
        assert perturb(items, "wrongsource", seed=2) == changed
        offtopic = add_offtopic(items, 1, seed=2)
        for i, (new, old) in enumerate(zip(changed, items, strict=True)):
            assert new.query == old.query
            # The same chunk offtopic appends with this seed: one chunk of another row, not one of its own.
            assert new.retrieved_content == offtopic[i].retrieved_content
            (extra,) = new.retrieved_content[len(old.retrieved_content) :]
            assert extra not in old.retrieved_content
            assert any(extra in o.retrieved_content for j, o in enumerate(items) if j != i)
            # The answer is that chunk's opening text (its first two sentences).
            said = words(new.actual_output)
            assert said and said == words(extra)[: len(said)]
            assert len(sentences(new.actual_output)) <= 2
    first = perturb(ROWS, "wrongsource", seed=2)[0]
    fact = first.retrieved_content[-1].split()[1]  # "Fact 31 one. ..." -> "31"
    assert fact[0] != "0"  # another row's: row 0's facts are 00 to 02
    assert first.actual_output == f"Fact {fact} one. Fact {fact} two."


def test_pad_appends_three_chunks_of_other_rows() -> None:
    padded = perturb(ROWS, "pad", seed=4)
    assert perturb(ROWS, "pad", seed=4) == padded
    assert padded == add_offtopic(ROWS, 3, seed=4)  # offtopic with three chunks, not a copy of its code
    for i, (new, old) in enumerate(zip(padded, ROWS, strict=True)):
        assert new.actual_output == old.actual_output
        assert new.retrieved_content[:3] == old.retrieved_content
        extra = new.retrieved_content[3:]
        assert len(extra) == len(set(extra)) == 3
        for chunk in extra:
            assert any(chunk in o.retrieved_content for j, o in enumerate(ROWS) if j != i)


@pytest.mark.parametrize("kind", ["offtopic", "wrongsource", "pad"])
def test_kinds_taking_from_other_rows_refuse_one_row(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(Path(sample_path()).read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    assert main(["bench", str(one), "--perturb", "echo", "--perturb", kind]) == 2
    captured = capsys.readouterr()
    assert f"--perturb {kind} needs at least 2 rows" in captured.err
    assert "1 readable row was used" in captured.err
    assert "perturb " not in captured.out  # refused before any row was judged
    with pytest.raises(ValueError, match=f"--perturb {kind} needs at least 2 rows"):
        perturb(ROWS[:1], kind)


def test_echo_runs_on_one_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(Path(sample_path()).read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    assert main(["bench", str(one), "--perturb", "echo"]) == 0  # it takes nothing from other rows
    assert any(line.startswith("echo ") for line in capsys.readouterr().out.splitlines())


def _drift(judge: str, kinds: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    """``bench --json`` on the sample's first 60 rows: the drift records by kind. A failed run is
    ``pytest.fail`` (not an AssertionError), so the known-limit tests below cannot pass as expected
    failures for it."""
    args = ["bench", sample_path(), "--limit", "60", "--judge", judge, "--json"]
    status = main([*args, *(a for kind in kinds for a in ("--perturb", kind))])
    drift = {d["perturbation"]: d for d in json.loads(capsys.readouterr().out)["drift"]}
    if (
        status != 0
        or list(drift) != kinds
        or any(d["errors_perturbed"] or d["rows"] != 60 for d in drift.values())
    ):
        pytest.fail(f"bench --judge {judge}: status {status}, drift {drift}")
    return drift


@pytest.mark.parametrize("judge", ["learned", "lexical"])
def test_bench_echo_wrongsource_pad(judge: str, capsys: pytest.CaptureFixture[str]) -> None:
    drift = _drift(judge, ["echo", "wrongsource", "pad", "offtopic"], capsys)  # 60 rows, no error
    # Only wrongsource measures the appended chunk; the other kinds' records keep their keys.
    assert 0.0 <= drift["wrongsource"]["appended_relevant"] <= 1.0
    assert all("appended_relevant" not in drift[k] for k in ("echo", "pad", "offtopic"))
    # Answers copied from another row's chunk leave the row's own chunks unused: most scores change and
    # the pooled utilization falls (not to 0 with these judges: see the known-limit tests below).
    assert drift["wrongsource"]["scores_changed"] > 0.5
    assert drift["wrongsource"]["pooled_perturbed"] < drift["wrongsource"]["pooled_original"] - 0.15
    # Three off-topic chunks move few scores (DESIGN.md: irrelevant chunks neither lower nor raise it).
    assert drift["pad"]["scores_changed"] < 0.15
    assert drift["pad"]["mean_score_perturbed"] == pytest.approx(
        drift["pad"]["mean_score_original"], abs=0.03
    )


def test_bench_table_has_the_appended_column_only_with_wrongsource(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert (
        main(["bench", sample_path(), "--limit", "20", "--perturb", "pad", "--perturb", "wrongsource"]) == 0
    )
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("perturb "))
    assert header.split()[-1] == "app.rel"
    wrong = next(line for line in lines if line.startswith("wrongsource "))
    pad = next(line for line in lines if line.startswith("pad "))
    assert len(wrong.split()) == len(header.split())  # a figure under every heading, app.rel included
    assert len(pad.split()) == len(wrong.split()) - 1  # no app.rel figure on pad
    assert main(["bench", sample_path(), "--limit", "20", "--perturb", "pad"]) == 0
    assert "app.rel" not in capsys.readouterr().out


# The learned judge's known limits (docs/judges.md, "Known limits"): these checks are what a good judge
# passes and the shipped model does not. strict: when one passes, the limit is fixed; drop its mark and
# update docs/judges.md.


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="known limit (docs/judges.md): an answer that only echoes the query with small edits still "
    "passes on most rows",
)
def test_learned_judge_utilization_falls_on_echoed_queries(capsys: pytest.CaptureFixture[str]) -> None:
    drift = _drift("learned", ["echo"], capsys)["echo"]
    assert drift["pooled_perturbed"] < 0.2 < drift["pooled_original"]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="known limit (docs/judges.md): an answer copied from an off-topic chunk makes that chunk relevant",
)
def test_learned_judge_keeps_a_copied_offtopic_chunk_irrelevant(capsys: pytest.CaptureFixture[str]) -> None:
    drift = _drift("learned", ["wrongsource"], capsys)["wrongsource"]
    assert drift["appended_relevant"] < 0.2
    assert drift["pooled_perturbed"] < 0.2 < drift["pooled_original"]


def test_refusal_answers_restate_the_query_in_a_refusal_and_are_seeded() -> None:
    items = [
        DatasetItem(
            query=f"What is compound {i}?", actual_output="It is a catechin.", retrieved_content=["c"]
        )
        for i in range(12)
    ]
    first = perturb(items, "refusal", seed=3)
    assert [x.actual_output for x in first] == [x.actual_output for x in perturb(items, "refusal", seed=3)]
    forms = set()
    for item, refused in zip(items, first, strict=True):
        assert refused.query == item.query and refused.retrieved_content == item.retrieved_content
        assert f"{item.query.rstrip('?')}." in refused.actual_output  # the query restated, no answer
        forms.add(refused.actual_output.replace(item.query.rstrip("?"), "{query}"))
    assert forms <= {form.format(query="{query}") + "." for form in REFUSAL_FORMS} and len(forms) > 1
    assert refuse("What is X? ", 0) == "The provided context does not say What is X."


def test_the_lexical_judge_gives_refusals_little_utilization(capsys: pytest.CaptureFixture[str]) -> None:
    # The learned judge does not (RAGBench's labels count refusals as used: docs/judges.md, Known limits):
    # on the bundled sample its pooled utilization only falls from 0.78 to 0.48.
    drift = _drift("lexical", ["refusal"], capsys)["refusal"]
    assert drift["pooled_perturbed"] < 0.3 < drift["pooled_original"]
