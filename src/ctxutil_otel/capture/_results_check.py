"""The span processor's check that its results go where its spans come from (issue 9: "never a silent
nowhere").

``provider.add_span_processor(UtilizationSpanProcessor())`` on a provider that is not the global one
sends the results to the global providers: nowhere when none is set, or to another pipeline. A live
SDK span does not say which provider made it, but it carries that provider's ``Resource`` object: when
it is not the very object of the provider the evaluation spans go to, they are two providers.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import Span

    from ..worker._evaluator import Evaluator

__all__ = ["ResultsCheck"]

_log = logging.getLogger("ctxutil_otel.capture")


class ResultsCheck:
    """Checks the first span a span processor sees started, once (``on_start``: only an in-process
    provider starts spans; spans an OTLP receiver rebuilds only end, and their resource is the
    sender's)."""

    __slots__ = ("_evaluator", "done")

    def __init__(self, evaluator: Evaluator) -> None:
        self._evaluator = evaluator
        self.done = False

    def check(self, span: Span) -> None:
        """Warn once when ``span`` comes from another tracer provider than the evaluation spans go to.
        Never raises."""
        if self.done:
            return
        self.done = True
        try:
            self._check(span)
        except Exception:  # a span or emitter of an unexpected shape: no check, never an error
            _log.debug("ctxutil-otel span processor: provider check failed", exc_info=True)

    def _check(self, span: Span) -> None:
        results = getattr(self._evaluator.emitter, "tracer_provider", None)
        if results is None:
            return  # an emitter of the user's own: where it sends results is its business
        if getattr(results, "resource", None) is getattr(span, "resource", None):
            return
        _log.warning(
            "ctxutil-otel span processor: the spans it reads come from a TracerProvider other than the "
            "one evaluation results go to (%s), so the results are not in the application's pipeline. "
            "Pass the application's providers: UtilizationSpanProcessor(tracer_provider=provider, "
            "meter_provider=..., logger_provider=...), or set them globally.",
            type(results).__name__,
        )
