"""One evaluation: convert the interaction, run the metric under the per-evaluation timeout with
OpenTelemetry instrumentation suppressed, and turn every failure into a result.

The engine (``_engine.py``) decides what is evaluated and when, and accounts for it; this module only
evaluates. :class:`InThreadJudging` runs the metric on the worker thread's own loop (``worker="thread"``);
the process worker (``_process.py``) converts in the application process and runs
:func:`evaluate_item` in its child. Nothing here raises (except ``asyncio.CancelledError``, when
shutdown cancels the evaluation).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value

from .._accounting import ERROR_TYPE_OTHER
from .._interaction import Interaction
from .._item import DatasetItem
from ..metric._contextual_utilization import ContextualUtilization
from ..metric._results import MetricEvaluationResult
from ._convert import MetricInfo, Rejection, to_dataset_item
from ._pipe import cap_texts, note_cut

__all__ = ["InThreadJudging", "evaluate", "evaluate_item"]


async def evaluate_item(
    metric: ContextualUtilization, item: DatasetItem, timeout_s: float, info: MetricInfo
) -> MetricEvaluationResult:
    """The metric's result for a converted ``item``: ``timeout`` past ``timeout_s`` seconds (the judge
    call is cancelled), or ``_OTHER`` for an unexpected exception from ``metric.execute`` (which
    handles judge errors itself; its class name is in the explanation), as ``label="error"`` results."""
    # The judge's own calls (HTTP, SDK instrumentation) must not become spans of the application.
    token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
    chunks = len(item.retrieved_content)
    try:
        return await asyncio.wait_for(_contained(metric.execute(item)), timeout_s)
    except asyncio.TimeoutError:
        return info.failure(
            "timeout", f"Evaluation timed out after {timeout_s:g} s.", total_chunks=chunks, item_id=item.id
        )
    except Exception as exc:  # execute() handles judge errors; anything else is still counted
        name = exc.name if isinstance(exc, _Exited) else type(exc).__name__
        explanation = f"Evaluation raised ({name})."
        return info.failure(ERROR_TYPE_OTHER, explanation, total_chunks=chunks, item_id=item.id)
    finally:
        detach(token)


class _Exited(Exception):
    """A judge raised ``KeyboardInterrupt`` or ``SystemExit`` (``name``): carried as an ``Exception``."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


async def _contained(run: Awaitable[MetricEvaluationResult]) -> MetricEvaluationResult:
    """``await run``, a user's judge's ``KeyboardInterrupt`` or ``SystemExit`` raised as :class:`_Exited`
    (its class only): ``wait_for`` runs ``run`` as a task, and a task that raises either stops the whole
    event loop, the worker with it, for every later interaction."""
    try:
        return await run
    except (KeyboardInterrupt, SystemExit) as exc:
        raise _Exited(type(exc).__name__) from None


def convert(interaction: Interaction, info: MetricInfo) -> DatasetItem | MetricEvaluationResult | Rejection:
    """The item to evaluate; a ``failed`` conversion as its error result; a ``dropped`` one as is."""
    converted = to_dataset_item(interaction)
    if isinstance(converted, Rejection) and converted.outcome == "failed":
        return info.failure_of(interaction, converted.detail, converted.message)
    return converted


async def evaluate(
    metric: ContextualUtilization, interaction: Interaction, timeout_s: float
) -> MetricEvaluationResult | Rejection:
    """The metric's result for ``interaction``, or the :class:`Rejection` of one that is not evaluable
    (outcome ``dropped``, nothing to emit).

    Failures are results with ``label="error"``: ``invalid_input`` (the interaction does not convert),
    ``timeout``, or ``_OTHER`` for an unexpected exception (see :func:`evaluate_item`).
    """
    info = MetricInfo.of(metric)
    converted = convert(interaction, info)
    if not isinstance(converted, DatasetItem):
        return converted
    item, cut = _capped(converted)
    result = await evaluate_item(metric, item, timeout_s, info)
    note_cut(result, cut)
    return result


def _capped(item: DatasetItem) -> tuple[DatasetItem, list[str]]:
    """``item`` with each text cut as the process worker cuts what it sends its child (``_pipe.py``), and
    the names of the texts cut: the metric's whitespace normalisation of a 64 MB chunk held the GIL for
    1.4 s on this worker's thread, stalling the application's."""
    (query, answer, chunks), cut = cap_texts(item.query, item.actual_output, item.retrieved_content)
    if not cut:
        return item, cut
    update = {"query": query, "actual_output": answer, "retrieved_content": chunks}
    return item.model_copy(update=update), cut


class InThreadJudging:
    """``worker="thread"``: the metric runs on the evaluator thread's asyncio loop."""

    def __init__(self, metric: ContextualUtilization, timeout_s: float) -> None:
        self._metric = metric
        self._timeout_s = timeout_s

    async def evaluate(self, interaction: Interaction) -> MetricEvaluationResult | Rejection:
        return await evaluate(self._metric, interaction, self._timeout_s)

    def close(self, timeout_s: float) -> None:
        """Nothing to release: the loop is the engine's."""

    def reset_after_fork(self) -> None:
        """Nothing is shared with a forked child."""
