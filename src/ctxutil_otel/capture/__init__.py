"""Capture: turn a running RAG application's activity into :class:`Interaction` objects.

* :class:`UtilizationCallbackHandler`: a LangChain callback handler (one interaction per root run).
* :class:`CtxutilInstrumentor`: the OpenTelemetry instrumentor attaching that handler to every LangChain run.
* :class:`Interaction`: what a capture path hands to the Evaluator (raw references).

``UtilizationCallbackHandler`` and ``CtxutilInstrumentor`` are imported on first access, so that importing
:class:`Interaction` (the worker and the span processor do) does not import ``langchain_core``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._interaction import Interaction

if TYPE_CHECKING:
    from ._instrumentor import CtxutilInstrumentor
    from ._langchain import UtilizationCallbackHandler

__all__ = ["CtxutilInstrumentor", "Interaction", "UtilizationCallbackHandler"]


def __getattr__(name: str) -> Any:
    if name == "UtilizationCallbackHandler":
        from ._langchain import UtilizationCallbackHandler

        return UtilizationCallbackHandler
    if name == "CtxutilInstrumentor":
        from ._instrumentor import CtxutilInstrumentor

        return CtxutilInstrumentor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
