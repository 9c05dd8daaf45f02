"""``bench --plot FILE.png``: predicted against labelled score per subset, and the low-utilization ROC.

Needs matplotlib (the optional ``plot`` extra: ``pip install 'ctxutil-otel[plot]'``), imported only
when a plot is asked for; it draws with the non-interactive Agg backend (no display needed).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path

from ..metric import MetricEvaluationResult
from ..metric._agreement import LOW_SCORE, LabelledRow, auroc

__all__ = ["plot_agreement", "roc_points"]


def roc_points(low: Sequence[float], other: Sequence[float]) -> list[tuple[float, float]]:
    """(false positive rate, true positive rate) when rows scored at or below each threshold are
    flagged; ``low`` are the predicted scores of labelled-low rows, ``other`` of the rest."""
    thresholds = sorted(set(low) | set(other))
    points = [(0.0, 0.0)]
    for t in thresholds:
        tpr = sum(1 for s in low if s <= t) / len(low)
        fpr = sum(1 for s in other if s <= t) / len(other)
        points.append((fpr, tpr))
    return points


def plot_agreement(
    labels: Sequence[LabelledRow], results: Sequence[MetricEvaluationResult], path: str | Path
) -> None:
    """Write a PNG: one scatter of predicted vs labelled score per subset (a little jitter so that the
    many rows at exactly 1.0 stay visible), and the ROC of flagging rows with labelled score < 0.5
    by a low predicted score, per subset and overall.

    Raises:
        ImportError: when matplotlib is missing (names the ``plot`` extra).
        OSError: when the file cannot be written.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "bench --plot needs matplotlib: pip install 'ctxutil-otel[plot]' (the 'plot' extra)"
        ) from exc

    groups: dict[str, list[tuple[float, float]]] = {}
    for row, result in zip(labels, results, strict=True):
        if row.expected_score is None or result.score is None:
            continue
        pair = (row.expected_score, result.score)
        groups.setdefault(row.subset or "all", []).append(pair)
        if row.subset is not None:
            groups.setdefault("overall", []).append(pair)
    names = [n for n in sorted(groups) if n != "overall"] + (["overall"] if "overall" in groups else [])
    panels = len(names) + 1
    cols = min(3, panels)
    rows_n = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 4.0 * rows_n), squeeze=False)
    flat = [ax for line in axes for ax in line]
    jitter = random.Random(0)
    for ax, name in zip(flat, names, strict=False):
        pairs = groups[name]
        xs = [e + jitter.uniform(-0.02, 0.02) for e, _ in pairs]
        ys = [p + jitter.uniform(-0.02, 0.02) for _, p in pairs]
        rmse = math.sqrt(sum((p - e) ** 2 for e, p in pairs) / len(pairs))
        ax.scatter(xs, ys, s=6, alpha=0.35)
        ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8)
        ax.set_title(f"{name}: n={len(pairs)}, RMSE {rmse:.3f}", fontsize=10)
        ax.set_xlabel("labelled score")
        ax.set_ylabel("predicted score")
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.05)
    roc_ax = flat[len(names)]
    for name in names:
        low = [p for e, p in groups[name] if e < LOW_SCORE]
        other = [p for e, p in groups[name] if e >= LOW_SCORE]
        area = auroc([-p for p in low], [-p for p in other])
        if area is None:
            continue
        fpr, tpr = zip(*roc_points(low, other), strict=True)
        width = 2.0 if name == "overall" else 1.0
        roc_ax.plot(fpr, tpr, linewidth=width, label=f"{name} AUROC {area:.3f}")
    roc_ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="--")
    roc_ax.set_title(f"flagging labelled score < {LOW_SCORE}", fontsize=10)
    roc_ax.set_xlabel("false positive rate")
    roc_ax.set_ylabel("true positive rate")
    roc_ax.legend(fontsize=7, loc="lower right")
    for ax in flat[panels:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
