"""Capture: turn a running RAG application's activity into :class:`Interaction` objects.

* :class:`UtilizationCallbackHandler`: a LangChain callback handler (one interaction per root run).
* :class:`Interaction`: what a capture path hands to the Evaluator (raw references).

``UtilizationCallbackHandler`` is imported on first access, so that importing :class:`Interaction`
(the worker and the span processor do) does not import ``langchain_core``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._interaction import Interaction

if TYPE_CHECKING:
    from ._langchain import UtilizationCallbackHandler

__all__ = ["Interaction", "UtilizationCallbackHandler"]


def __getattr__(name: str) -> Any:
    if name == "UtilizationCallbackHandler":
        from ._langchain import UtilizationCallbackHandler

        return UtilizationCallbackHandler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
