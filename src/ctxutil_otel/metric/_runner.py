"""Run metrics over a dataset with bounded concurrency (batch evaluation, used by the CLI)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from .._accounting import ERROR_TYPE_OTHER
from .._item import DatasetItem
from ._contextual_utilization import ContextualUtilization
from ._results import MetricEvaluationResult

__all__ = ["MetricRunner"]


class MetricRunner:
    """Evaluate many items with one or more metrics, ``max_concurrency`` evaluations at a time.

    Args:
        metrics: The metrics to run on every item (at least one).
        max_concurrency: Evaluations in flight at once (>= 1).

    Raises:
        ValueError: for an empty ``metrics`` list or ``max_concurrency < 1``.
    """

    def __init__(self, metrics: Sequence[ContextualUtilization], *, max_concurrency: int = 8) -> None:
        if not metrics:
            raise ValueError("metrics must name at least one metric")
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.metrics = list(metrics)
        self.max_concurrency = max_concurrency

    async def run(
        self, dataset: Iterable[DatasetItem | Mapping[str, Any]], show_progress: bool = False
    ) -> list[MetricEvaluationResult]:
        """Evaluate every item; return results in input order, item-major (for each item, one result
        per metric in ``metrics`` order; with one metric, exactly one result per item).

        Failures are isolated per item: an item that fails validation (a mapping that is not a valid
        :class:`DatasetItem`) or whose evaluation raises gets a ``label="error"`` result with
        ``error_type`` ``invalid_input`` or ``_OTHER`` (the exception's class in ``error_message``), and the
        rest continue.
        ``show_progress`` draws a ``tqdm`` progress bar on stderr.
        """
        items = list(dataset)
        semaphore = asyncio.Semaphore(self.max_concurrency)
        progress = None
        if show_progress:
            from tqdm import tqdm

            progress = tqdm(total=len(items) * len(self.metrics), file=sys.stderr, unit="eval")

        async def one(
            item: DatasetItem | Mapping[str, Any], metric: ContextualUtilization
        ) -> MetricEvaluationResult:
            async with semaphore:
                try:
                    parsed = item if isinstance(item, DatasetItem) else DatasetItem.model_validate(item)
                except ValidationError as exc:
                    result = _failed(metric, "invalid_input", str(exc))
                else:
                    try:
                        result = await metric.execute(parsed)
                    except Exception as exc:  # isolate one item's unexpected failure from the rest
                        message = f"{type(exc).__name__}: {exc}"
                        result = _failed(metric, ERROR_TYPE_OTHER, message, parsed.id)
            if progress is not None:
                progress.update(1)
            return result

        try:
            return list(await asyncio.gather(*(one(item, m) for item in items for m in self.metrics)))
        finally:
            if progress is not None:
                progress.close()


def _failed(
    metric: ContextualUtilization, error_type: str, message: str, item_id: str | None = None
) -> MetricEvaluationResult:
    return MetricEvaluationResult.failure(
        metric_name=metric.name,
        threshold=metric.threshold,
        error_type=error_type,
        explanation=f"The evaluation failed ({error_type}).",
        error_message=message,
        item_id=item_id,
    )
