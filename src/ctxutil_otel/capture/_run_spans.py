"""The span another instrumentation opened for a LangChain run, found through that instrumentation's API.

Used by the callback handler so that the evaluation span lands in the same trace as the evaluated run's
own spans, as a child of the root run's span (issue 9 item 5).

Supported:

* OpenInference (``openinference-instrumentation-langchain``): its tracer keeps each run's span by
  ``run_id`` while the run is open, and exposes it through the public ``LangChainInstrumentor().get_span(
  run_id)`` (the instrumentor is a singleton). It never attaches its spans to the OpenTelemetry context
  (on purpose, see its ``_tracer.py``), so ``trace.get_current_span()`` cannot find them.

Not supported (documented in docs/telemetry.md, "One trace with other instrumentations"): instrumentations
with no public way to look a run's span up (OpenLLMetry's ``opentelemetry-instrumentation-langchain`` keeps
its spans in a handler it does not expose). With those, use the span processor instead: it reads the
instrumentation's finished spans and parents the evaluation to the generation span itself.

Cost: one ``sys.modules`` lookup when OpenInference is not imported; otherwise an attribute read and a
dictionary lookup. Never raises.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Final
from uuid import UUID

from opentelemetry.trace import SpanContext

if TYPE_CHECKING:
    from ._runs import RootRun

__all__ = ["OPENINFERENCE_MODULE", "adopt_run_span", "run_span_context"]

OPENINFERENCE_MODULE: Final = "openinference.instrumentation.langchain"


def run_span_context(run_id: UUID) -> SpanContext | None:
    """The context of the span an instrumentation opened for ``run_id`` and still holds, or ``None``."""
    module = sys.modules.get(OPENINFERENCE_MODULE)
    if module is None:
        return None
    try:
        instrumentor = module.LangChainInstrumentor()
        if not instrumentor.is_instrumented_by_opentelemetry:
            return None  # get_span() would print a hint to stdout
        span = instrumentor.get_span(run_id)
        if span is None:
            return None
        context = span.get_span_context()
    except Exception:  # an API that changed: behave as if the instrumentation were absent
        return None
    return context if isinstance(context, SpanContext) and context.is_valid else None


def adopt_run_span(root: RootRun) -> None:
    """Make the span another instrumentation opened for ``root``'s run its trace and parent; leave the
    root as it is when there is none. Before the sampling decision only."""
    found = run_span_context(root.run_id)
    if found is not None:
        root.trace_id, root.parent = found.trace_id, found
