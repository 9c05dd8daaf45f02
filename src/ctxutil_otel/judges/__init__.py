"""Judges decide, per chunk, relevance to the query and utilization by the answer.

* :class:`SemanticJudge`: offline, deterministic; relevance from the query alone with word embeddings
  beside the lexical features (the default; needs the ``semantic`` extra:
  ``pip install 'ctxutil-otel[semantic]'``, without which the default is the learned judge).
* :class:`LearnedJudge`: offline, deterministic, pure Python gradient-boosted trees.
* :class:`LexicalJudge`: offline, deterministic, pure Python word-overlap rules.
* :class:`OpenAIJudge`: any OpenAI-compatible chat model, one call per interaction.

:func:`load_model` checks and compiles a learned-judge model file of your own (parsed JSON) for
``LearnedJudge(learned_model=...)``; it raises :class:`ModelFileError` (a ``ValueError``) naming the field.

Any object with the :class:`Judge` shape works with the metric.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from ._base import (
    ChunkVerdict,
    Judge,
    JudgeError,
    JudgeResult,
    JudgeTimeoutError,
    TokenUsage,
    VerdictMismatchError,
)
from ._learned import LearnedJudge
from ._learned_model import ModelFileError, load_model
from ._lexical import LexicalJudge

if TYPE_CHECKING:
    from ._openai import OpenAIJudge
    from ._semantic import SemanticJudge
    from ._semantic_embed import SemanticExtraMissingError

__all__ = [
    "ChunkVerdict",
    "Judge",
    "JudgeError",
    "JudgeResult",
    "JudgeTimeoutError",
    "LearnedJudge",
    "LexicalJudge",
    "ModelFileError",
    "OpenAIJudge",
    "SemanticExtraMissingError",
    "SemanticJudge",
    "TokenUsage",
    "VerdictMismatchError",
    "load_model",
]

# OpenAIJudge imports the openai SDK; SemanticJudge's module is light (its numpy and tokenizers are imported
# when one is built): each is loaded only when asked for.
__getattr__ = lazy_attributes(
    __name__,
    {
        "OpenAIJudge": "._openai",
        "SemanticJudge": "._semantic",
        "SemanticExtraMissingError": "._semantic_embed",
    },
)
