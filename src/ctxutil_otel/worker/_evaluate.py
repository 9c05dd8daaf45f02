"""One evaluation on the worker's loop: convert the interaction, run the metric under the per-evaluation
timeout with OpenTelemetry instrumentation suppressed, and turn every failure into a result.

The engine (``_engine.py``) decides what is evaluated and when, and accounts for it; this module only
evaluates. It never raises (except ``asyncio.CancelledError``, when shutdown cancels the evaluation).
"""

from __future__ import annotations

import asyncio

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value

from .._interaction import Interaction
from ..metric._contextual_utilization import ContextualUtilization
from ..metric._results import MetricEvaluationResult
from ._convert import Rejection, error_result, to_dataset_item

__all__ = ["evaluate"]


async def evaluate(
    metric: ContextualUtilization, interaction: Interaction, timeout_s: float
) -> MetricEvaluationResult | Rejection:
    """The metric's result for ``interaction``, or the :class:`Rejection` of one that is not evaluable
    (outcome ``dropped``, nothing to emit).

    Failures are results with ``label="error"``: ``invalid_input`` (the interaction does not convert),
    ``timeout`` (the metric ran past ``timeout_s`` seconds; the judge call is cancelled), or the class
    name of an unexpected exception from ``metric.execute`` (which handles judge errors itself).
    """
    converted = to_dataset_item(interaction)
    if isinstance(converted, Rejection):
        if converted.outcome == "dropped":
            return converted
        return error_result(metric, interaction, converted.detail, converted.message)
    # The judge's own calls (HTTP, SDK instrumentation) must not become spans of the application.
    token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
    try:
        return await asyncio.wait_for(metric.execute(converted), timeout_s)
    except asyncio.TimeoutError:
        return error_result(metric, interaction, "timeout", f"Evaluation timed out after {timeout_s:g} s.")
    except Exception as exc:  # execute() handles judge errors; anything else is still counted
        return error_result(metric, interaction, type(exc).__name__, "Evaluation raised.")
    finally:
        detach(token)
