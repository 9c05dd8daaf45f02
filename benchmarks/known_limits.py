"""The learned judge's known limits as figures (docs/judges.md, "Known limits"), for both offline judges.

    .venv/bin/python benchmarks/known_limits.py                        # ../shared/data/ragbench_dev.jsonl
    .venv/bin/python benchmarks/known_limits.py FILE.jsonl [--limit N]

On a RAGBench-shaped labelled file (``chunk_labels``, ``documents_sentences``, ``relevant_sentence_keys``):

* **partial answers**: every row with two or more labelled-relevant chunks (and no repeated chunk)
  answered with the labelled-relevant sentences of its first labelled-relevant chunk only; about
  1 / (relevant chunks) is right. Prints each judge's mean score against that.

On the bundled sample (``ctxutil_otel.data``, no sentence keys needed):

* **refusals that restate the query**: each form of ``bench --perturb refusal`` in turn as every row's
  answer; per form and judge, the mean score over the rows it scores and how many pass (score >= 0.5).
* **empty answers**: the rows scored with their own answer that an empty answer makes not applicable.
* **the query as the answer, models alone** (learned judge): the rows where the decision rule, before the
  ``draws_on_nothing`` rule sets it aside, would find some chunk used.

Reporting only: nothing here chooses a parameter.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxutil_otel.cli._perturb_rows import REFUSAL_FORMS, refuse
from ctxutil_otel.data import load_sample
from ctxutil_otel.judges import LearnedJudge, LexicalJudge
from ctxutil_otel.judges._base import ChunkVerdict
from ctxutil_otel.judges._learned_decision import decide

DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "ragbench_dev.jsonl"


def _score(verdicts: Sequence[ChunkVerdict]) -> float | None:
    relevant = [v for v in verdicts if v.is_relevant]
    return sum(v.is_utilized for v in relevant) / len(relevant) if relevant else None


def partial_answer(row: dict[str, Any]) -> tuple[str, int] | None:
    """The labelled-relevant sentences of the row's first labelled-relevant chunk, and the number of
    labelled-relevant chunks; ``None`` when the row has fewer than two or repeats a chunk."""
    chunks = row["retrieved_content"]
    relevant = [i for i, label in enumerate(row["chunk_labels"]) if label["relevant"]]
    if len(relevant) < 2 or len(set(chunks)) != len(chunks):
        return None
    keys = set(row.get("relevant_sentence_keys") or ())
    kept = [
        text for key, text in row.get("documents_sentences", [[]] * len(chunks))[relevant[0]] if key in keys
    ]
    return (" ".join(kept), len(relevant)) if kept else None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("file", nargs="?", type=Path, default=DEV)
    parser.add_argument("--limit", type=int, default=None, help="only the first N rows of FILE")
    args = parser.parse_args(argv)
    if not args.file.is_file():
        parser.error(f"file: no file at {args.file} (the RAGBench labelled files live in ../shared/data/)")
    judges = {"learned": LearnedJudge(), "lexical": LexicalJudge()}

    lines = args.file.read_text(encoding="utf-8").splitlines()[: args.limit]
    sums = dict.fromkeys(judges, 0.0)
    right = 0.0
    n = 0
    for line in lines:
        row = json.loads(line)
        made = partial_answer(row)
        if made is None:
            continue
        answer, n_relevant = made
        n += 1
        right += 1 / n_relevant
        for name, judge in judges.items():
            sums[name] += _score(judge.judge_sync(row["query"], answer, row["retrieved_content"])) or 0.0
    if n:
        figures = ", ".join(f"{name} {total / n:.3f}" for name, total in sums.items())
        print(f"partial answers ({args.file.name}, {n} rows): right about {right / n:.3f}; {figures}")

    sample = load_sample()
    learned = judges["learned"]
    echoed = [
        decide(learned.learned_model.decision, p.relevant, p.utilized)
        for p in (learned.probabilities(r["query"], r["query"], r["retrieved_content"]) for r in sample)
    ]
    scored_echo = [v for v in echoed if any(v.relevant)]
    used = sum(any(v.utilized) for v in scored_echo)
    print(
        f"learned, bundled sample, the query as the answer, models alone: some chunk used on {used} of "
        f"{len(scored_echo)} scored rows (the draws_on_nothing rule then uses none)"
    )
    for name, judge in judges.items():
        own = [
            _score(judge.judge_sync(r["query"], r["actual_output"], r["retrieved_content"])) for r in sample
        ]
        scored = [r for r, s in zip(sample, own, strict=True) if s is not None]
        empty = sum(_score(judge.judge_sync(r["query"], "", r["retrieved_content"])) is None for r in scored)
        print(f"{name}, bundled sample: an empty answer leaves {empty} of {len(scored)} scored rows unscored")
        for form in range(len(REFUSAL_FORMS)):
            got = [
                _score(judge.judge_sync(r["query"], refuse(r["query"], form), r["retrieved_content"]))
                for r in sample
            ]
            kept = [s for s in got if s is not None]
            mean = sum(kept) / len(kept) if kept else 0.0
            passed = sum(s >= 0.5 for s in kept)
            print(f"  refusal {REFUSAL_FORMS[form]!r}: mean {mean:.3f}, pass {passed} of {len(kept)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
