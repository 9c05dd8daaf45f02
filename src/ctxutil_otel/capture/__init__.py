"""Capture: turn a running RAG application's activity into :class:`Interaction` objects.

* :class:`UtilizationCallbackHandler`: a LangChain callback handler (one interaction per root run).
* :class:`CtxutilInstrumentor`: the OpenTelemetry instrumentor attaching that handler to every LangChain run.
* :class:`Interaction`: what a capture path hands to the Evaluator (raw references).

``UtilizationCallbackHandler`` and ``CtxutilInstrumentor`` are imported on first access, so that importing
:class:`Interaction` (the worker and the span processor do) does not import ``langchain_core``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._interaction import Interaction
from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._instrumentor import CtxutilInstrumentor
    from ._langchain import UtilizationCallbackHandler

__all__ = ["CtxutilInstrumentor", "Interaction", "UtilizationCallbackHandler"]


__getattr__ = lazy_attributes(
    __name__, {"UtilizationCallbackHandler": "._langchain", "CtxutilInstrumentor": "._instrumentor"}
)
