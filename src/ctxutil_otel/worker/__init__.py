"""The evaluation worker: sampling, admission, a bounded queue and one daemon thread running an
asyncio loop that evaluates captured interactions off the request path.

* :class:`Evaluator`: the engine both capture paths (LangChain callbacks, span processor) share.
* :class:`EvaluatorStats`: the accounting snapshot returned by :meth:`Evaluator.stats`.
* :class:`EvaluationEmitter`: what the evaluator calls with each result.
"""

from __future__ import annotations

from ._evaluator import Evaluator
from ._stats import DROP_REASONS, OUTCOMES, EvaluatorStats
from ._types import EvaluationEmitter

__all__ = ["DROP_REASONS", "OUTCOMES", "EvaluationEmitter", "Evaluator", "EvaluatorStats"]
