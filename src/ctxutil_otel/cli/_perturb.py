"""Drift checks for ``ctxutil-otel bench``: perturb a labelled file and compare the judge's figures.

``--perturb KIND`` (repeatable) re-runs the metric on a perturbed copy of the rows and reports, for the
original and the perturbed rows side by side, the **pooled utilization** (utilized relevant chunks /
relevant chunks, over every row) and the **mean score** (over rows with a score). A judge worth
alerting on must react the way the truth does:

* ``swap``: every answer is replaced by another row's answer (a seeded derangement: no row keeps its
  own). True utilization drops to about 0; the pooled utilization should follow.
* ``truncate``: every answer is cut to its first sentence. Fewer chunks can have been used; the pooled
  utilization should fall.
* ``shuffle``: the chunks of every row are put in a seeded random order. Nothing changed in substance;
  the figures should not move.
* ``offtopic``: every row gets one chunk of another row appended (one it does not already hold).
  DESIGN.md: irrelevant chunks neither lower nor raise the score, so the figures should not move; a
  judge that moves here moves your dashboards when the retriever's top-k changes.

Beside pooled and mean, ``changed`` is the share of the rows scored on the original whose score differs
on the perturbed copy (a row that became not applicable counts as changed).

All perturbations are deterministic for a given ``--seed`` (default 0).
"""

from __future__ import annotations

import argparse
import asyncio
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._item import DatasetItem
from ..judges._text import sentences
from ..metric import MetricEvaluationResult, MetricRunner
from ..metric._agreement import prediction_from_result

__all__ = [
    "PERTURBATIONS",
    "DriftFigures",
    "add_arguments",
    "add_offtopic",
    "check_extras",
    "drift",
    "perturb",
    "render_drift",
]

PERTURBATIONS = ("swap", "truncate", "shuffle", "offtopic")


class DriftFigures(BaseModel):
    """One perturbation's figures: original vs perturbed (``None`` when no row had a relevant chunk)."""

    perturbation: str
    rows: int
    pooled_original: float | None
    pooled_perturbed: float | None
    mean_score_original: float | None
    mean_score_perturbed: float | None
    errors_perturbed: int
    scores_changed: float | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--perturb``, ``--seed`` and ``--plot`` to the ``bench`` parser."""
    parser.add_argument(
        "--perturb",
        action="append",
        choices=PERTURBATIONS,
        default=None,
        help="drift check, repeatable: swap answers between rows, truncate answers to their first "
        "sentence, shuffle chunk order, or append another row's chunk (offtopic); reports pooled "
        "utilization and mean score original vs perturbed, and the share of scores that changed",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the perturbations (default 0)")
    parser.add_argument(
        "--plot",
        default=None,
        metavar="FILE.png",
        help="draw predicted vs labelled score per subset and the low-utilization ROC "
        "(needs the 'plot' extra)",
    )


def check_extras(args: argparse.Namespace, rows: int) -> str | None:
    """What makes ``--perturb``/``--plot`` impossible, found before the run (``None`` when nothing):
    ``swap`` with fewer than 2 rows (no other row's answer to take), ``--plot`` without matplotlib
    (names the ``plot`` extra) or into a directory that does not exist."""
    for kind in ("swap", "offtopic"):
        if args.perturb and kind in args.perturb and rows < 2:
            return f"--perturb {kind} needs at least 2 rows (it takes from other rows); the file has {rows}"
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (only whether it imports)
        except ImportError:
            return "bench --plot needs matplotlib: pip install 'ctxutil-otel[plot]' (the 'plot' extra)"
        parent = Path(args.plot).resolve().parent
        if not parent.is_dir():
            return f"--plot: no directory {parent} to write {Path(args.plot).name} in"
    return None


def _first_sentence(answer: str) -> str:
    parts = sentences(answer)
    return parts[0].strip() if parts else answer


def add_offtopic(items: Sequence[DatasetItem], k: int, *, seed: int = 0) -> list[DatasetItem]:
    """Each item with up to ``k`` chunks of other rows appended, each from a random other row and none
    equal to a chunk it holds (fewer when the other rows have no such chunk).

    Raises:
        ValueError: with fewer than 2 items.
    """
    if len(items) < 2:
        raise ValueError("--perturb offtopic needs at least 2 rows (it takes chunks from other rows)")
    rng = random.Random(seed)
    out = []
    for i, item in enumerate(items):
        own = set(item.retrieved_content)
        extra: list[str] = []
        for _ in range(50 * k):  # bounded: rows whose chunks are all among this row's give nothing
            if len(extra) == k:
                break
            j = rng.randrange(len(items))
            chunks = items[j].retrieved_content
            chunk = rng.choice(chunks) if chunks else ""
            if j != i and chunk.strip() and chunk not in own:
                own.add(chunk)
                extra.append(chunk)
        out.append(item.model_copy(update={"retrieved_content": [*item.retrieved_content, *extra]}))
    return out


def perturb(items: Sequence[DatasetItem], kind: str, *, seed: int = 0) -> list[DatasetItem]:
    """A perturbed copy of ``items`` (see the module docstring); the originals are not changed.

    Raises:
        ValueError: for an unknown ``kind``, or ``swap``/``offtopic`` with fewer than 2 items.
    """
    rng = random.Random(seed)
    if kind == "swap":
        if len(items) < 2:
            raise ValueError("--perturb swap needs at least 2 rows (answers are swapped between rows)")
        order = list(range(len(items)))
        rng.shuffle(order)
        partner = {order[k]: order[(k + 1) % len(order)] for k in range(len(order))}
        return [
            item.model_copy(update={"actual_output": items[partner[i]].actual_output})
            for i, item in enumerate(items)
        ]
    if kind == "truncate":
        return [
            item.model_copy(update={"actual_output": _first_sentence(item.actual_output)}) for item in items
        ]
    if kind == "shuffle":
        out = []
        for item in items:
            chunks = list(item.retrieved_content)
            rng.shuffle(chunks)
            out.append(item.model_copy(update={"retrieved_content": chunks}))
        return out
    if kind == "offtopic":
        return add_offtopic(items, 1, seed=seed)
    raise ValueError(f"--perturb: unknown perturbation {kind!r} (choose from {', '.join(PERTURBATIONS)})")


def _pooled_and_mean(results: Sequence[MetricEvaluationResult]) -> tuple[float | None, float | None, int]:
    used = relevant = 0
    scores = []
    errors = 0
    for result in results:
        prediction = prediction_from_result(result)
        if prediction.error:
            errors += 1
            continue
        relevant += sum(prediction.relevant)
        used += sum(prediction.utilized)
        if prediction.score is not None:
            scores.append(prediction.score)
    pooled = used / relevant if relevant else None
    return pooled, (sum(scores) / len(scores) if scores else None), errors


def drift(
    runner: MetricRunner,
    items: Sequence[DatasetItem],
    results: Sequence[MetricEvaluationResult],
    kinds: Sequence[str],
    *,
    seed: int = 0,
) -> list[DriftFigures]:
    """Run ``runner`` on each perturbation of ``items`` and compare with the original ``results``."""
    pooled, mean, _ = _pooled_and_mean(results)
    out = []
    for kind in dict.fromkeys(kinds):  # each kind once, in the order asked
        perturbed = asyncio.run(runner.run(perturb(items, kind, seed=seed)))
        p_pooled, p_mean, p_errors = _pooled_and_mean(perturbed)
        pairs = [(a.score, b.score) for a, b in zip(results, perturbed, strict=True) if a.score is not None]
        out.append(
            DriftFigures(
                perturbation=kind,
                rows=len(items),
                pooled_original=pooled,
                pooled_perturbed=p_pooled,
                mean_score_original=mean,
                mean_score_perturbed=p_mean,
                scores_changed=sum(a != b for a, b in pairs) / len(pairs) if pairs else None,
                errors_perturbed=p_errors,
            )
        )
    return out


def _f(value: float | None) -> str:
    return "   n/a" if value is None else f"{value:6.3f}"


def render_drift(figures: Sequence[DriftFigures]) -> str:
    """A text table: one line per perturbation, original vs perturbed."""
    lines = [
        f"{'perturb':<9} {'rows':>5} {'pooled':>6} {'->':>2} {'pert.':>6} {'mean':>6} {'->':>2} {'pert.':>6} "
        f"{'changed':>7}"
    ]
    for f in figures:
        lines.append(
            f"{f.perturbation:<9} {f.rows:>5} {_f(f.pooled_original)} -> {_f(f.pooled_perturbed)} "
            f"{_f(f.mean_score_original)} -> {_f(f.mean_score_perturbed)} {_f(f.scores_changed):>7}"
            + (f"  ({f.errors_perturbed} errors)" if f.errors_perturbed else "")
        )
    lines.append(
        "pooled = utilized/relevant chunks predicted over all rows; mean = mean predicted score; "
        "changed = share of scored rows whose score changed"
    )
    return "\n".join(lines)


def extras(
    args: argparse.Namespace,
    runner: MetricRunner,
    items: Sequence[DatasetItem],
    labels: Sequence[Any],
    results: Sequence[MetricEvaluationResult],
) -> tuple[dict[str, Any], list[str]]:
    """The ``--perturb`` and ``--plot`` parts of ``bench``: (JSON fields, text lines).

    Raises:
        ImportError: for ``--plot`` without matplotlib (the message names the ``plot`` extra).
    """
    record: dict[str, Any] = {}
    text: list[str] = []
    if args.perturb:
        figures = drift(runner, items, results, args.perturb, seed=args.seed)
        record["drift"] = [f.model_dump() for f in figures]
        text.append(render_drift(figures))
    if args.plot:
        from ._plot import plot_agreement

        plot_agreement(labels, results, args.plot)
        record["plot"] = str(args.plot)
        text.append(f"plot written to {args.plot}")
    return record, text
