"""Train the LearnedJudge model from ragbench_train.jsonl and write the model file the package ships.

    .venv/bin/pip install -e '.[train]'
    .venv/bin/python benchmarks/train_learned.py            # writes src/ctxutil_otel/data/learned_judge.json
    .venv/bin/python benchmarks/train_learned.py --check    # retrains and compares with the shipped file

Steps (all deterministic for a given ``--seed``; training only ever reads ``--train``):

1. Word-frequency table: the ``--vocabulary`` most frequent English words of the ``wordfreq`` package
   (training-time dependency only), mapped to the judge's word keys (stems; frequencies of forms that
   share a key are added), rounded to 0.1 Zipf and written into the model file.
2. Per-chunk feature rows (``chunk_features``, the function the judge runs) for every training row, the
   chunks de-duplicated as the metric does, plus (``_train_data.py``) one **swapped-answer copy** of every
   row (another row's answer, every chunk labelled *not utilized*) and **truncated-answer copies**: each
   row whose answer has more than N sentences cut to its first N, for each N of ``--truncate-cuts``
   (default 1 and 2); a used chunk stays used only when a kept sentence draws on its labelled-used
   sentences; and one **echo copy** of every row (the answer replaced by the row's query, every chunk
   labelled *not utilized*: an answer that only repeats the question uses nothing; always built and
   measured, learned from only with ``--echo``: every variant tried cost ~0.015 out-of-fold score RMSE
   on the natural rows, see issue 11's notes); and one **wrong-source copy** of every row (a chunk of
   another row appended and the answer copied from it, that chunk *not relevant*, the row's own chunks
   *not utilized*; always built and measured, learned from only with ``--wrong-source``: it fixes
   answers drawn from an off-topic chunk but costs utilization F1 and truncation drop out of fold,
   docs/judges.md); and one **partial copy** of every row whose answer draws on several used chunks (the
   answer's sentences that draw on the first of them; always built and measured: the trainer prints their
   out-of-fold mean score against the labelled one; learned from only with ``--partial``, which did not
   lower it). Relevance labels are otherwise unchanged in the copies. Without
   them a model learns "answers use their context" from natural data and barely reacts when they stop
   doing so.
3. ``P(relevant)``: ``HistGradientBoostingClassifier`` over all chunks of the natural rows and of the
   truncated, swapped-answer and echo copies (``--no-relevance-truncated``, ``--no-relevance-swapped``,
   ``--no-relevance-echo``: without them). A chunk is relevant to the *query*, whatever the answer does
   with it, so every copy keeps the row's relevance labels: without the copies P(relevant) follows the
   answer (out of fold, relevance F1 on the swapped copies 0.53 against 0.85 on natural rows; 0.76 with
   them), so an answer that ignores a relevant chunk makes it irrelevant instead of unused, and the
   score cannot fall. ``P(utilized | relevant)``: the same over the
   labelled-relevant chunks of natural rows and copies.
4. Out-of-fold probabilities for every example (``--folds``-fold, rows split at random, a row's copies in
   its fold; ``--folds-by subset``: one fold per subset, each judged by models that never saw its
   domain); their chunk AUROCs on the natural rows (P(relevant) over all chunks, P(utilized | relevant)
   over the labelled-relevant ones: the chunk models compared directly; ``--ablate`` measures a variant
   without some features); on them the relevance threshold (best relevance F1) and the fallback
   (``_train_decision.py``, which also prints the out-of-fold figures of the decision, overall and per
   subset). The utilized count is the expected number of used relevant chunks, rounded: no third model
   (model formats 1-3 had a row-level regressor of the score, which followed the training domains' base
   rates; docs/judges-history.md).
5. Final chunk models on all rows; export every tree; check that the pure-Python trees reproduce
   scikit-learn's raw outputs exactly on all training rows; write JSON.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # HistGradientBoosting threads fight on a shared machine
import datetime
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _train_data import EMPTY, EMPTY_REPLACED, examples_of
from _train_decision import by_subset, choose_decision, choose_fallback, report
from _train_models import ablate, best_f1_threshold, chunk_aurocs, export, fit_chunk_models, raw

from ctxutil_otel.judges._learned_features import FEATURE_NAMES, WordWeights
from ctxutil_otel.judges._learned_model import FORMAT, load_model
from ctxutil_otel.judges._text import words

ROOT = Path(__file__).resolve().parents[1]
# ../shared/data beside the checkout (for a worktree under ../wt/NAME, two levels up).
DATA = next(
    (p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
    ROOT.parent / "shared" / "data",
)
SHIPPED = ROOT / "src" / "ctxutil_otel" / "data" / "learned_judge.json"


def load(path: Path, limit: int | None) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return rows[:limit] if limit else rows


def zipf_table(size: int) -> dict[str, float]:
    """Word key -> Zipf frequency for the ``size`` most frequent English words of ``wordfreq``."""
    from wordfreq import top_n_list, word_frequency

    total: dict[str, float] = {}
    for word in top_n_list("en", size):
        keys = words(word)
        if len(keys) == 1:
            total[keys[0]] = total.get(keys[0], 0.0) + word_frequency(word, "en")
    return {k: round(math.log10(f * 1e9), 1) for k, f in total.items() if f > 0}


def grouped(zipf: dict[str, float]) -> dict[str, str]:
    groups: dict[str, list[str]] = {}
    for word, z in zipf.items():
        groups.setdefault(f"{z:.1f}", []).append(word)
    return {z: " ".join(sorted(ws)) for z, ws in sorted(groups.items(), key=lambda kv: -float(kv[0]))}


def train(args: argparse.Namespace) -> dict[str, Any]:
    started = time.perf_counter()
    rng = random.Random(args.seed)
    rows = load(args.train, args.limit)
    zipf = zipf_table(args.vocabulary)
    weights = WordWeights.from_zipf(zipf)
    cuts = tuple(int(c) for c in args.truncate_cuts.split(","))
    examples = examples_of(
        rows,
        weights,
        rng,
        truncated=not args.no_truncated,
        cuts=cuts,
        offtopic=True,
        echo_every=args.echo_every,
        prefix_words=args.prefix_words,
    )
    natural = examples[: len(rows)]
    ablate(examples, args.ablate)
    print(
        f"{len(rows)} rows, {sum(len(e.features) for e in natural)} unique chunks, {len(examples)} examples "
        f"with the copies; features in {time.perf_counter() - started:.1f} s",
        flush=True,
    )

    # Out-of-fold chunk probabilities: a row and its copies are in the same fold; with --folds-by subset,
    # a fold is one subset (leave one domain out), and the row order is shuffled all the same so the
    # seed's later draws do not depend on the choice.
    order = list(range(len(rows)))
    rng.shuffle(order)
    fold_of = {row: position % args.folds for position, row in enumerate(order)}
    if args.folds_by == "subset":
        subsets = sorted({r["subset"] for r in rows})
        if len(subsets) < 2:
            raise SystemExit(
                f"--folds-by subset: the training rows hold {len(subsets)} subset ({', '.join(subsets)}); "
                "leaving one out needs at least 2 (use --folds, or more rows than --limit gives)"
            )
        fold_of = {i: subsets.index(r["subset"]) for i, r in enumerate(rows)}
        args.folds = len(subsets)
    oof_rel: list[list[float]] = [[] for _ in examples]
    oof_use: list[list[float]] = [[] for _ in examples]
    for fold in range(args.folds):
        fit_on = [ex for ex in examples if fold_of[ex.row_index] != fold]
        rel, use = fit_chunk_models(fit_on, args)
        for k, ex in enumerate(examples):
            if fold_of[ex.row_index] == fold:
                oof_rel[k] = [float(p) for p in rel.predict_proba(ex.features)[:, 1]]
                oof_use[k] = [float(p) for p in use.predict_proba(ex.features)[:, 1]]
        print(f"fold {fold + 1}/{args.folds} done at {time.perf_counter() - started:.1f} s", flush=True)

    if os.environ.get("CTXUTIL_TRAIN_CACHE"):  # scratch: keep out-of-fold probabilities for exploring
        import pickle

        with open(os.environ["CTXUTIL_TRAIN_CACHE"], "wb") as handle:
            pickle.dump((examples, oof_rel, oof_use, fold_of), handle)
    flat_rel = [p for k in range(len(rows)) for p in oof_rel[k]]
    flat_lab = [r for ex in natural for r in ex.relevant]
    print(chunk_aurocs(natural, oof_rel, oof_use), flush=True)
    threshold = best_f1_threshold(flat_rel, flat_lab)
    fallback = args.fallback if args.fallback is not None else choose_fallback(examples, oof_rel, threshold)
    print(f"relevance threshold (best out-of-fold F1 on train): {threshold:.2f}; fallback {fallback:.2f}")

    nothing_fallback = choose_fallback(
        examples, oof_rel, threshold, (EMPTY, EMPTY_REPLACED), "nothing_fallback"
    )
    decision = choose_decision(natural, oof_rel, oof_use, threshold, fallback, nothing_fallback)
    print("  out of fold on train: " + report(examples, oof_rel, oof_use, decision))
    print(
        "  per subset ("
        + ("each judged by chunk models that never saw it" if args.folds_by == "subset" else "out of fold")
        + "):"
    )
    print(by_subset(examples, oof_rel, oof_use, decision), flush=True)

    rel, use = fit_chunk_models(examples, args)
    document: dict[str, Any] = {
        "format": FORMAT,
        "provenance": {
            "model_id": f"ctxutil-gbdt-ragbench-seed{args.seed}",
            "training_data": f"{args.train.name} ({len(rows)} rows, RAGBench validation splits, CC-BY-4.0) "
            "plus one swapped-answer copy of each row labelled not utilized"
            + (
                ""
                if args.no_truncated
                else f" and truncated-answer copies (the answer cut to its first {args.truncate_cuts} "
                "sentences, of each row with more), labelled by the sentences kept"
                + ("; P(relevant) learns from them too" if args.relevance_truncated else "")
            )
            + (
                "; replaced-chunk copies (another row's chunks, none relevant) and copies with 1 and 3 "
                "other rows' chunks appended (not relevant, not utilized; the row's own labels kept)"
                if args.offtopic
                else ""
            ),
            "word_frequencies": f"wordfreq {_version('wordfreq')} top {args.vocabulary} English words "
            "(training-time only; exported here as the 'zipf' table)",
            "trainer": f"scikit-learn {_version('scikit-learn')} HistGradientBoosting",
            "command": " ".join(["python", "benchmarks/train_learned.py", *args.argv]),
            "seed": args.seed,
            "date": args.date,
            "parameters": {
                k: getattr(args, k)
                for k in (
                    "max_iter",
                    "learning_rate",
                    "max_leaf_nodes",
                    "min_samples_leaf",
                    "l2_regularization",
                    "truncate_cuts",
                    "truncated_weight",
                    "relevance_truncated",
                    "offtopic",
                    "echo",
                    "echo_weight",
                    "echo_every",
                    "chunk_echo",
                    "prefix_words",
                    "relevance_echo",
                    "relevance_swapped",
                    "wrong_source",
                    "partial",
                    "monotonic",
                    "folds",
                    "folds_by",
                    "vocabulary",
                )
            },
        },
        "features": list(FEATURE_NAMES),
        "decision": decision.as_dict(),
        "relevance": export(rel),
        "utilization": export(use),
        "zipf": grouped(zipf),
    }
    # The id names the content: a retrained model with other trees or thresholds gets another id (the
    # judge reports it as ctxutil.judge.model), the same training reproduces it.
    digest = hashlib.sha256(_canonical(document).encode("utf-8")).hexdigest()
    document["provenance"]["model_id"] = f"ctxutil-gbdt-ragbench-seed{args.seed}-{digest[:8]}"

    # The pure-Python trees must give scikit-learn's raw outputs exactly.
    loaded = load_model(document)
    all_x = [x for ex in examples for x in ex.features]
    for name, fitted, ensemble, xs in (
        ("relevance", rel, loaded.relevance, all_x),
        ("utilization", use, loaded.utilization, all_x),
    ):
        expected = raw(fitted, xs)
        got = [ensemble.raw(x) for x in xs]
        mismatches = sum(1 for a, b in zip(expected, got, strict=True) if a != b)
        if mismatches:
            raise SystemExit(f"{name}: pure-Python trees differ from scikit-learn on {mismatches} rows")
    print(f"exported trees reproduce scikit-learn exactly; total {time.perf_counter() - started:.1f} s")
    return document


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def _canonical(document: dict[str, Any]) -> str:
    body = {k: v for k, v in document.items() if k != "provenance"}
    return json.dumps(body, sort_keys=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--train", type=Path, default=DATA / "ragbench_train.jsonl")
    parser.add_argument("--out", type=Path, default=SHIPPED)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--date", default=datetime.date.today().isoformat(), help="provenance date")
    parser.add_argument("--limit", type=int, default=None, help="only the first N training rows (tests)")
    parser.add_argument("--max-iter", type=int, default=150, help="trees per chunk model")
    parser.add_argument("--learning-rate", type=float, default=0.08)
    parser.add_argument("--max-leaf-nodes", type=int, default=15)
    parser.add_argument("--min-samples-leaf", type=int, default=20, help="of the chunk models' trees")
    parser.add_argument("--l2-regularization", type=float, default=1.0, help="of the chunk models")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument(
        "--folds-by",
        choices=("random", "subset"),
        default="random",
        help="out-of-fold folds: random (--folds of them) or one per subset (leave one domain out: "
        "the figures a domain the model never saw would get; --folds is then the number of subsets). "
        "The threshold and fallback of the written model are chosen on these folds' predictions too, so "
        "--check against a model trained with random folds may report DIFFERS",
    )
    parser.add_argument(
        "--fallback",
        type=float,
        default=None,
        help="fallback relevance probability (default: chosen out of fold, choose_fallback)",
    )
    parser.add_argument("--vocabulary", type=int, default=25_000, help="wordfreq words exported")
    parser.add_argument(
        "--no-truncated", action="store_true", help="leave out the truncated-answer copies (a variant)"
    )
    parser.add_argument(
        "--truncate-cuts",
        default="1,2",
        help="comma-separated sentence counts: a truncated copy of each row cut to its first N sentences",
    )
    parser.add_argument(
        "--truncated-weight", type=float, default=1.0, help="training weight of the truncated copies"
    )
    # On/off switches of the training set (each also --no-NAME).
    switches: tuple[tuple[str, bool, str], ...] = (
        (
            "--relevance-truncated",
            True,
            "train P(relevant) on the truncated copies too (their relevance labels are the row's)",
        ),
        (
            "--offtopic",
            True,
            "learn from the replaced-chunk and appended-off-topic-chunk copies (always built and measured)",
        ),
        ("--echo", False, "learn from the echo copies (the answer replaced by the query, nothing utilized)"),
        ("--chunk-echo", True, "P(utilized | relevant) learns from the echo copies"),
        (
            "--wrong-source",
            False,
            "learn from the wrong-source copies (an appended off-topic chunk the answer copies, labelled "
            "not relevant; the row's own chunks not utilized); always built and measured",
        ),
        (
            "--relevance-swapped",
            True,
            "train P(relevant) on the swapped-answer copies too (relevance labels are the row's: a chunk "
            "relevant to the query stays relevant whatever the answer)",
        ),
        (
            "--partial",
            False,
            "learn from the partial copies (the answer's sentences that draw on one of several used "
            "chunks; _train_data.partial_answer); always built and measured",
        ),
        (
            "--monotonic",
            False,
            "constrain the trees: more query coverage never lowers P(relevant), more answer support never "
            "lowers P(utilized | relevant) (_train_models.monotonic)",
        ),
        (
            "--relevance-echo",
            True,
            "train P(relevant) on the echo copies too (their relevance labels are the row's)",
        ),
    )
    for name, default, text in switches:
        parser.add_argument(name, action=argparse.BooleanOptionalAction, default=default, help=text)
    parser.add_argument(
        "--echo-every", type=int, default=1, help="an echo copy of every N-th row (1: of every row)"
    )
    parser.add_argument(
        "--prefix-words",
        type=int,
        default=0,
        help="also learn from copies with the answer cut to its first N words (0: none)",
    )
    parser.add_argument("--echo-weight", type=float, default=1.0, help="training weight of the echo copies")
    parser.add_argument(
        "--ablate",
        default="",
        help="comma-separated chunk features held at 0 (a variant measured without them)",
    )
    parser.add_argument("--check", action="store_true", help="compare with --out instead of writing it")
    raw_argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(raw_argv)
    # The provenance's command: the options that shape the model (not --check, --out or --train's path).
    args.argv = []
    skip = False
    for a in raw_argv:
        if skip:
            skip = False
        elif a in ("--out", "--train"):
            skip = True
        elif a != "--check" and not a.startswith(("--out=", "--train=")):
            args.argv.append(a)
    if args.ablate and not args.check:
        parser.error(
            "--ablate measures a variant (with --check); a model trained without some features "
            "would still be given them by the judge"
        )
    if not args.train.is_file():
        parser.error(
            f"--train: no file at {args.train} (the RAGBench labelled files live in ../shared/data/)"
        )
    try:
        import sklearn  # noqa: F401
        import wordfreq  # noqa: F401
    except ImportError as exc:
        parser.error(f"training needs the 'train' extra (pip install -e '.[train]'): {exc}")
    document = train(args)
    if args.check:
        shipped = json.loads(args.out.read_text(encoding="utf-8"))
        same = _canonical(shipped) == _canonical(document)
        print(
            f"{args.out}: {'identical to' if same else 'DIFFERS from'} the retrained model (provenance aside)"
        )
        return 0 if same else 1
    args.out.write_text(json.dumps(document, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
