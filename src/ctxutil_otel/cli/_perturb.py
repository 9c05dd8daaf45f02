"""Drift checks for ``ctxutil-otel bench``: perturb a labelled file and compare the judge's figures.

``--perturb KIND`` (repeatable) re-runs the metric on a perturbed copy of the rows (made by
:mod:`._perturb_rows`) and reports, for the original and the perturbed rows side by side, the **pooled
utilization** (utilized relevant chunks / relevant chunks, over every chunk of every row, appended chunks
included) and the **mean score** (over rows with a score). No label is read: any judge can be checked. A
judge worth alerting on must react the way the truth does:

* ``swap``: every answer is replaced by another row's answer (a seeded derangement: no row keeps its
  own). True utilization drops to about 0; the pooled utilization should follow.
* ``truncate``: every answer is cut to its first sentence. Fewer chunks can have been used; the pooled
  utilization should fall.
* ``shuffle``: the chunks of every row are put in a seeded random order. Nothing changed in substance;
  the figures should not move.
* ``offtopic``: every row gets one chunk of another row appended (one it does not already hold).
  DESIGN.md: irrelevant chunks neither lower nor raise the score, so the figures should not move; a
  judge that moves here moves your dashboards when the retriever's top-k changes.
* ``echo``: every answer is replaced by a light edit of its own query (``"Q: " + query``, the query
  twice, or its words reversed; one per row, seeded; never the query's words in order: ``"Q: " + query``
  when reversing changes nothing). The answer draws on no chunk: the pooled utilization should fall to
  about 0.
* ``wrongsource``: ``offtopic``'s chunk is appended and the answer replaced by that chunk's first two
  sentences. The row's own chunks are unused and the appended one is off the query's topic, so the
  pooled utilization should fall to about 0 and the appended chunk should not be called relevant.
* ``pad``: every row gets three chunks of other rows appended (``offtopic`` with three). Nothing should
  move.
* ``refusal``: every answer is replaced by a refusal that restates the query ("The provided context does
  not say ...", "I am not sure about ...", "I'm sorry, the documents do not contain information about
  ..."; one per row, seeded). Such an answer draws on no chunk (DESIGN.md): the pooled utilization should
  fall to about 0. RAGBench's labels count some refusals as using their context, so a judge trained on
  them may not.

Beside pooled and mean, ``changed`` (``scores_changed`` in ``--json``, see :class:`DriftFigures`) is the
share of the rows scored on the original whose score differs on the perturbed copy (a row that became not
applicable counts as changed); for ``wrongsource``, ``appended_relevant`` (``app.rel`` in the table) is
the share of the rows given a chunk (and judged without error) whose appended chunk the judge called
relevant. docs/batch.md lists every JSON key.

All perturbations are deterministic for a given ``--seed`` (default 0).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._item import DatasetItem
from ..metric import MetricEvaluationResult, MetricRunner
from ..metric._agreement import prediction_from_result
from ._io import enumerated
from ._perturb_rows import FROM_OTHER_ROWS, PERTURBATIONS, add_offtopic, perturb

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


class DriftFigures(BaseModel):
    """One perturbation's figures: original vs perturbed (``None`` when no row had a relevant chunk);
    ``scores_changed`` and ``appended_relevant`` are shares in [0, 1] (``None`` when no row counts,
    ``appended_relevant`` ``None`` for every kind but ``wrongsource``)."""

    perturbation: str
    rows: int
    pooled_original: float | None
    pooled_perturbed: float | None
    mean_score_original: float | None
    mean_score_perturbed: float | None
    errors_perturbed: int
    scores_changed: float | None = None
    appended_relevant: float | None = None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--perturb``, ``--seed`` and ``--plot`` to the ``bench`` parser."""
    parser.add_argument(
        "--perturb",
        action="append",
        type=enumerated,
        choices=PERTURBATIONS,
        default=None,
        help="drift check, repeatable: swap answers between rows, truncate answers to their first "
        "sentence, shuffle chunk order, append another row's chunk (offtopic) or three (pad), answer "
        "with an edit of the query (echo) or a refusal that restates it (refusal), or append another "
        "row's chunk and answer with its first two sentences (wrongsource); reports pooled utilization "
        "and mean score original vs perturbed, the share of scores that changed and, for wrongsource, "
        "the share of appended chunks called relevant",
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
    a kind that takes from other rows (``swap``, ``offtopic``, ``wrongsource``, ``pad``) with fewer than 2
    rows, ``--plot`` without matplotlib (names the ``plot`` extra) or into a directory that does not
    exist. ``rows`` is the number of rows the run would use: readable labelled lines, after ``--limit``."""
    for kind in FROM_OTHER_ROWS:
        if args.perturb and kind in args.perturb and rows < 2:
            limit = getattr(args, "limit", None)
            counted = "unreadable or unlabelled lines are not counted"
            return (
                f"--perturb {kind} needs at least 2 rows (it takes from other rows); {rows} readable "
                f"{'row was' if rows == 1 else 'rows were'} used "
                f"({f'after --limit {limit}; ' if limit is not None else ''}{counted})"
            )
    if args.plot:
        try:
            import matplotlib  # noqa: F401  (only whether it imports)
        except ImportError:
            return "bench --plot needs matplotlib: pip install 'ctxutil-otel[plot]' (the 'plot' extra)"
        parent = Path(args.plot).resolve().parent
        if not parent.is_dir():
            return f"--plot: no directory {parent} to write {Path(args.plot).name} in"
    return None


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


def _appended_relevant(
    items: Sequence[DatasetItem], perturbed: Sequence[DatasetItem], results: Sequence[MetricEvaluationResult]
) -> float | None:
    """Of the rows given at least one chunk and judged without error, the share where the judge called an
    appended chunk (one at an index past the original chunks) relevant; ``None`` when no row counts."""
    counted = called = 0
    for old, new, result in zip(items, perturbed, results, strict=True):
        own = len(old.retrieved_content)
        prediction = prediction_from_result(result)
        if len(new.retrieved_content) == own or prediction.error:
            continue
        counted += 1
        called += any(prediction.relevant[own:])
    return called / counted if counted else None


def drift(
    runner: MetricRunner,
    items: Sequence[DatasetItem],
    results: Sequence[MetricEvaluationResult],
    kinds: Sequence[str],
    *,
    seed: int = 0,
) -> list[DriftFigures]:
    """Run ``runner`` on each perturbation of ``items`` (each kind once, in the order given) and compare
    with the original ``results`` (one per item, in order).

    Raises:
        ValueError: for an unknown kind, or one that takes from other rows with fewer than 2 items.
    """
    pooled, mean, _ = _pooled_and_mean(results)
    out = []
    for kind in dict.fromkeys(kinds):  # each kind once, in the order asked
        rows = perturb(items, kind, seed=seed)
        perturbed = asyncio.run(runner.run(rows))
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
                appended_relevant=_appended_relevant(items, rows, perturbed)
                if kind == "wrongsource"
                else None,
            )
        )
    return out


def _f(value: float | None) -> str:
    return "   n/a" if value is None else f"{value:6.3f}"


def render_drift(figures: Sequence[DriftFigures]) -> str:
    """A text table: one line per perturbation, original vs perturbed; the ``app.rel`` column (the
    appended chunk called relevant) only when ``wrongsource`` is among ``figures``, blank on other kinds."""
    width = max([9, *(len(f.perturbation) for f in figures)])
    appended = any(f.perturbation == "wrongsource" for f in figures)
    lines = [
        f"{'perturb':<{width}} {'rows':>5} {'pooled':>6} {'->':>2} {'pert.':>6} {'mean':>6} {'->':>2} "
        f"{'pert.':>6} {'changed':>7}" + (f" {'app.rel':>7}" if appended else "")
    ]
    for f in figures:
        line = (
            f"{f.perturbation:<{width}} {f.rows:>5} {_f(f.pooled_original)} -> {_f(f.pooled_perturbed)} "
            f"{_f(f.mean_score_original)} -> {_f(f.mean_score_perturbed)} {_f(f.scores_changed):>7}"
        )
        if appended:
            line += f" {_f(f.appended_relevant) if f.perturbation == 'wrongsource' else '':>7}"
        if f.errors_perturbed:
            line += f"  ({f.errors_perturbed} errors)"
        lines.append(line.rstrip())
    legend = (
        "pooled = utilized/relevant chunks predicted over all rows; mean = mean predicted score; "
        "changed = share of scored rows whose score changed"
    )
    if appended:
        legend += "; app.rel = share of rows whose appended chunk was called relevant (wrongsource)"
    lines.append(legend)
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
        # appended_relevant only where it is measured (wrongsource): the other kinds' records keep their keys
        record["drift"] = [
            f.model_dump(exclude=None if f.perturbation == "wrongsource" else {"appended_relevant"})
            for f in figures
        ]
        text.append(render_drift(figures))
    if args.plot:
        from ._plot import plot_agreement

        plot_agreement(labels, results, args.plot)
        record["plot"] = str(args.plot)
        text.append(f"plot written to {args.plot}")
    return record, text
