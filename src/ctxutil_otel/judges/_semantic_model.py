"""The semantic judge's model file: two tree ensembles over lexical and embedding features.

One JSON document (``ctxutil_otel/data/semantic_judge.json``, written by ``benchmarks/train_semantic.py``)::

    {"format": "ctxutil-otel-semantic-judge/1",
     "provenance": {"model_id": ..., "training_data": ..., "command": ..., "seed": ...,
                    "base_model": ..., "licence": ..., ...},
     "embedding": "wordllama-l2_supercat-256",   # the embedder the features were computed with
     "relevance_features": [name, ...],           # must equal RELEVANCE_FEATURES (no answer feature)
     "utilization_features": [name, ...],         # must equal UTILIZATION_FEATURES
     "zipf": {...}, "decision": {...},            # as in the learned judge's file
     "relevance": ENSEMBLE, "utilization": ENSEMBLE}

Ensembles, ``zipf`` and ``decision`` are checked and compiled as the learned judge's are
(:mod:`ctxutil_otel.judges._learned_model`): pure-Python trees, no text from the file reaches the compiler.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from ._learned_features import WordWeights
from ._learned_model import Decision, Ensemble, ModelFileError, _ensemble, read_weights
from ._semantic_features import RELEVANCE_FEATURES, UTILIZATION_FEATURES

__all__ = ["EMBEDDING", "FORMAT", "SemanticModel", "load_semantic_model", "shipped_semantic_model"]

FORMAT = "ctxutil-otel-semantic-judge/1"
EMBEDDING = "wordllama-l2_supercat-256"
MODEL_RESOURCE = "semantic_judge.json"


@dataclass(frozen=True)
class SemanticModel:
    """A loaded semantic model: P(relevant) over :data:`RELEVANCE_FEATURES`, P(utilized | relevant) over
    :data:`UTILIZATION_FEATURES`, the word weights and the :class:`Decision`."""

    relevance: Ensemble
    utilization: Ensemble
    weights: WordWeights
    decision: Decision
    provenance: Mapping[str, Any]


def _names(document: Mapping[str, Any], key: str, expected: tuple[str, ...]) -> None:
    names = document.get(key)
    if not isinstance(names, list):
        raise ModelFileError(f"{key}: expected a list of feature names, got {type(names).__name__}")
    if names != list(expected):
        raise ModelFileError(f"{key}: the model was trained on other features than this version computes")


def load_semantic_model(document: Mapping[str, Any]) -> SemanticModel:
    """Check and compile a parsed semantic model document (the module docstring's format).

    Raises:
        ModelFileError: (a ``ValueError``) naming the first missing or malformed field.
    """
    if not isinstance(document, Mapping):
        raise ModelFileError(f"model document: expected a JSON object, got {type(document).__name__}")
    if document.get("format") != FORMAT:
        raise ModelFileError(f"format: expected {FORMAT!r}, got {document.get('format')!r}")
    if document.get("embedding") != EMBEDDING:
        raise ModelFileError(f"embedding: expected {EMBEDDING!r}, got {document.get('embedding')!r}")
    _names(document, "relevance_features", RELEVANCE_FEATURES)
    _names(document, "utilization_features", UTILIZATION_FEATURES)
    provenance = document.get("provenance")
    if not isinstance(provenance, Mapping):
        raise ModelFileError("provenance: expected an object")
    return SemanticModel(
        relevance=_ensemble(document.get("relevance"), len(RELEVANCE_FEATURES), "relevance"),
        utilization=_ensemble(document.get("utilization"), len(UTILIZATION_FEATURES), "utilization"),
        weights=read_weights(document),
        decision=Decision.from_dict(document.get("decision")),
        provenance=dict(provenance),
    )


@lru_cache(maxsize=1)
def shipped_semantic_model() -> SemanticModel:
    """The model shipped in ``ctxutil_otel/data/semantic_judge.json`` (loaded and compiled once)."""
    text = resources.files("ctxutil_otel.data").joinpath(MODEL_RESOURCE).read_text(encoding="utf-8")
    return load_semantic_model(json.loads(text))
