"""How much the judge is asked to explain: a setting (``CTXUTIL_MODE``) and an argument of the metric."""

from __future__ import annotations

import enum

__all__ = ["EvaluationMode"]


class EvaluationMode(str, enum.Enum):
    """How much the judge is asked to explain.

    * ``GRANULAR`` (default): every verdict carries a one-line ``reason``; the breakdown explains itself.
    * ``FAST``: the judge is called with ``reasons=False`` and reasons are dropped. The verdicts and the
      score are the same; an LLM judge writes far fewer output tokens (cheaper, faster).
    """

    GRANULAR = "granular"
    FAST = "fast"
