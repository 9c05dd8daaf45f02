"""The evaluation worker: sampling, admission, a bounded queue and one daemon thread running an
asyncio loop that evaluates captured interactions off the request path.

* :class:`Evaluator`: the engine both capture paths (LangChain callbacks, span processor) share.
* :class:`EvaluatorStats`: the accounting snapshot returned by :meth:`Evaluator.stats`.
* :class:`EvaluationEmitter`: what the evaluator calls with each result.
* :class:`Ticket`: one admitted interaction (``Evaluator.admit``), closed exactly once by ``submit`` or
  ``drop``; :class:`TicketWarning` when one is closed twice or collected open.
* :class:`Admission` (a refusal), :data:`Outcome`, :data:`DropReason`: the accounting vocabulary
  (``typing.get_args`` lists the values).
"""

from __future__ import annotations

from .._accounting import Admission, DropReason, Outcome
from ._evaluator import Evaluator
from ._stats import EvaluatorStats
from ._ticket import Ticket, TicketWarning
from ._types import EvaluationEmitter

__all__ = [
    "Admission",
    "DropReason",
    "EvaluationEmitter",
    "Evaluator",
    "EvaluatorStats",
    "Outcome",
    "Ticket",
    "TicketWarning",
]
