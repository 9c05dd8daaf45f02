"""The learned judge's model file: loading, checking, and scoring gradient-boosted trees in pure Python.

The model is one JSON document (``ctxutil_otel/data/learned_judge.json``, written by
``benchmarks/train_learned.py``)::

    {"format": "ctxutil-otel-learned-judge/4",
     "provenance": {"training_data": ..., "command": ..., "seed": ..., "date": ..., ...},
     "features": [name, ...],                 # must equal FEATURE_NAMES
     "zipf": {"5.3": "word word ...", ...},   # word keys grouped by Zipf frequency
     "relevance": ENSEMBLE, "utilization": ENSEMBLE,   # per chunk: P(relevant), P(utilized | relevant)
     "decision": {"relevance_threshold": p, "fallback_threshold": p, "round_offset": r,
                  "nothing_fallback": p}}

    ENSEMBLE = {"baseline": float, "link": "logit", "trees": [TREE, ...]}   # logit: a probability
    TREE = [NODE, ...]   # node 0 is the root; every other node reached is the child of exactly one node
    NODE = [value]  (a leaf)  |  [feature, threshold, left, right]  (go left when x[feature] <= threshold)

The decision's thresholds and ``round_offset`` are in [0, 1]; the ``zipf`` keys are finite numbers >= 0
(the Zipf scale: log10 of a word's frequency per billion words).

Each ensemble is compiled once, at load, into one Python function of nested ``if`` statements built only
from the checked integers and floats of the file (no text from the file reaches the compiler), so one
chunk costs about 25 µs per ensemble of 150 trees. The sum starts at ``baseline`` and adds the trees in
file order, as scikit-learn's ``HistGradientBoosting*`` does: the outputs are the trainer's to the last
bit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import lru_cache
from importlib import resources
from typing import Any

from ._learned_features import FEATURE_NAMES, WordWeights

__all__ = [
    "FORMAT",
    "MAX_DEPTH",
    "MAX_NODES",
    "Decision",
    "Ensemble",
    "LearnedModel",
    "ModelFileError",
    "load_model",
    "read_weights",
    "shipped_model",
]

FORMAT = "ctxutil-otel-learned-judge/4"
"""Version 4: two chunk ensembles and the decision; the utilized count is the expected number of used
relevant chunks (the sum of their P(utilized | relevant)). Versions 1-3 also had a row-level ensemble
predicting the interaction's score, whose estimate set that count; it followed the training domains'
base rates (out of fold with one subset held out: low-score AUROC 0.57 against 0.63 without it, see
``docs/judges-history.md``). Files of other versions are refused: retrain with
``benchmarks/train_learned.py``."""

MAX_DEPTH = 32
"""Deepest tree a model file may hold (split levels below the root; the shipped model's deepest: 11)."""
MAX_NODES = 20_000
"""Most nodes of one ensemble, all its trees together (the shipped model: 4,350 each). Counted before
anything is compiled, since compiling is what costs: a file at this limit loads in about 1.4 s and 119 MB
peak against the shipped file's 0.7 s and 58 MB (docs/judges.md), so an oversized file is refused."""


class ModelFileError(ValueError):
    """The model file is not a valid learned-judge model (the message names the field)."""


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ModelFileError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _index(value: Any, limit: int, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        raise ModelFileError(f"{where}: expected an integer in [0, {limit}), got {value!r}")
    return value


def _tree_source(tree: Any, n_features: int, where: str, lines: list[str]) -> None:
    if not isinstance(tree, list) or not tree:
        raise ModelFileError(f"{where}: expected a non-empty list of nodes")
    # Each node is emitted at most once (a second visit is refused), so the source and the time to build
    # it are linear in the nodes; a node shared by two parents would otherwise be emitted once per path
    # to it, exponential in the depth.
    parent_of: dict[int, int | None] = {}
    ancestors: set[int] = set()

    def emit(node_id: int, parent: int | None, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise ModelFileError(f"{where}: deeper than {MAX_DEPTH} levels (MAX_DEPTH; or a cycle)")
        if node_id in ancestors:
            raise ModelFileError(
                f"{where}[{parent}]: a cycle back to node {node_id}, so deeper than {MAX_DEPTH} levels"
            )
        if node_id in parent_of:
            raise ModelFileError(
                f"{where}[{node_id}]: node {node_id} has two parents (nodes {parent_of[node_id]} and "
                f"{parent}): each node must be the child of one node only (a tree, not a graph)"
            )
        parent_of[node_id] = parent
        node = tree[node_id]
        pad = "    " * (depth + 1)
        if isinstance(node, list) and len(node) == 1:
            lines.append(f"{pad}s += {_number(node[0], f'{where}[{node_id}]')!r}")
            return
        if not isinstance(node, list) or len(node) != 4:
            raise ModelFileError(f"{where}[{node_id}]: expected [value] or [feature, threshold, left, right]")
        feature = _index(node[0], n_features, f"{where}[{node_id}].feature")
        threshold = _number(node[1], f"{where}[{node_id}].threshold")
        left = _index(node[2], len(tree), f"{where}[{node_id}].left")
        right = _index(node[3], len(tree), f"{where}[{node_id}].right")
        ancestors.add(node_id)
        lines.append(f"{pad}if v{feature} <= {threshold!r}:")
        emit(left, node_id, depth + 1)
        lines.append(f"{pad}else:")
        emit(right, node_id, depth + 1)
        ancestors.discard(node_id)

    emit(0, None, 0)


def _compiled(source: str, where: str) -> Callable[[Sequence[float]], float]:
    namespace: dict[str, Any] = {}
    # The source is built from checked integers and floats only (``_ensemble``): no text from the file.
    exec(compile(source, f"<{where}>", "exec"), {"__builtins__": {}}, namespace)
    return namespace["f"]  # type: ignore[no-any-return]  # the ``def f`` of the source


def _unpickled(source: str, n_trees: int) -> Ensemble:
    return Ensemble(raw=_compiled(source, "unpickled ensemble"), n_trees=n_trees, source=source)


@dataclass(frozen=True)
class Ensemble:
    """A compiled tree ensemble: ``raw(x)`` is the sum of the trees (log-odds), ``__call__`` the probability
    (the logistic function of it, the file's ``logit`` link).

    Pickled as its generated source and compiled again when unpickled (a function made by ``exec`` has
    no module to be found in), so a judge holding it reaches ``worker="process"``'s child."""

    raw: Callable[[Sequence[float]], float]
    n_trees: int
    source: str = field(default="", repr=False, compare=False)

    def __reduce__(self) -> tuple[Any, ...]:
        if not self.source:
            raise TypeError("an Ensemble built without its source cannot be pickled")
        return (_unpickled, (self.source, self.n_trees))

    def __call__(self, x: Sequence[float]) -> float:
        value = self.raw(x)
        return 1.0 / (1.0 + math.exp(-value)) if value >= -700 else 0.0


def _ensemble(spec: Any, n_features: int, where: str) -> Ensemble:
    if not isinstance(spec, Mapping):
        raise ModelFileError(f"{where}: expected an object")
    baseline = _number(spec.get("baseline"), f"{where}.baseline")
    link = spec.get("link")
    if link != "logit":  # the one link the judge applies: the ensembles give probabilities
        raise ModelFileError(f"{where}.link: expected 'logit' (the ensemble is a probability), got {link!r}")
    trees = spec.get("trees")
    if not isinstance(trees, list):
        raise ModelFileError(f"{where}.trees: expected a list")
    nodes = sum(len(tree) if isinstance(tree, list) else 1 for tree in trees)
    if nodes > MAX_NODES:
        raise ModelFileError(
            f"{where}.trees: {nodes} nodes in all, more than the {MAX_NODES} an ensemble may have (MAX_NODES)"
        )
    # Unpack the row into locals once: a local read is cheaper than an index per comparison.
    unpack = ", ".join(f"v{i}" for i in range(n_features))
    lines = ["def f(x):", f"    ({unpack},) = x", f"    s = {baseline!r}"]
    for t, tree in enumerate(trees):
        _tree_source(tree, n_features, f"{where}.trees[{t}]", lines)
    lines.append("    return s")
    source = "\n".join(lines)
    return Ensemble(raw=_compiled(source, where), n_trees=len(trees), source=source)


@dataclass(frozen=True)
class Decision:
    """How probabilities become verdicts (the model file's ``decision`` object; the rule is
    ``ctxutil_otel.judges._learned_decision.decide``).

    Attributes:
        relevance_threshold: A chunk is relevant when P(relevant) >= this.
        fallback_threshold: When no chunk reaches the threshold, the most likely one is relevant if its
            P(relevant) >= this (else the interaction is not applicable).
        round_offset: ``floor(expected + round_offset)`` chunks are marked utilized, ``expected`` the
            sum of P(utilized | relevant) over the relevant chunks (0.5: the nearest whole count).
        nothing_fallback: The fallback for an answer that draws on nothing (no words, or only the
            query repeated): relevance is then judged from the query alone (the features of an empty
            answer), and the most likely chunk is relevant if its P(relevant) >= this, so that such an
            answer scores 0.0 where relevant context was retrieved (DESIGN.md) rather than not applicable.
    """

    relevance_threshold: float
    fallback_threshold: float
    round_offset: float
    nothing_fallback: float

    def as_dict(self) -> dict[str, float]:
        """The ``decision`` object of the model file."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, decision: Any) -> Decision:
        """Check and read a ``decision`` object: each field a number in [0, 1] (``ModelFileError``
        naming the field and the range)."""
        if not isinstance(decision, Mapping):
            raise ModelFileError("decision: expected an object")
        values = {}
        for f in fields(cls):
            value = _number(decision.get(f.name), f"decision.{f.name}")
            if not 0.0 <= value <= 1.0:
                raise ModelFileError(f"decision.{f.name}: expected a number in [0, 1], got {value!r}")
            values[f.name] = value
        return cls(**values)


@dataclass(frozen=True)
class LearnedModel:
    """A loaded model: the two chunk ensembles, the word weights (from the ``zipf`` table) and the
    :class:`Decision`."""

    relevance: Ensemble
    utilization: Ensemble
    weights: WordWeights
    decision: Decision
    provenance: Mapping[str, Any]


def read_weights(document: Mapping[str, Any]) -> WordWeights:
    """The word weights of a model document's ``zipf`` table (``ModelFileError`` naming the key at fault)."""
    raw_zipf = document.get("zipf")
    if not isinstance(raw_zipf, Mapping):
        raise ModelFileError("zipf: expected an object of 'zipf value' -> 'space-separated words'")
    zipf: dict[str, float] = {}
    for value, joined in raw_zipf.items():
        try:
            z = float(value)
        except (TypeError, ValueError):
            raise ModelFileError(f"zipf: key {value!r} is not a number") from None
        if not (math.isfinite(z) and z >= 0):
            raise ModelFileError(f"zipf: key {value!r} is not a finite number >= 0 (a Zipf frequency)")
        if not isinstance(joined, str):
            raise ModelFileError(f"zipf[{value!r}]: expected a string of words")
        for word in joined.split():
            zipf[word] = z
    return WordWeights.from_zipf(zipf)


def load_model(document: Mapping[str, Any]) -> LearnedModel:
    """Check and compile a parsed model document (the format in the module docstring), e.g.
    ``LearnedJudge(learned_model=load_model(json.loads(path.read_text())))``. Linear in the file's size.

    Raises:
        ModelFileError: (a ``ValueError``) for any malformed document, naming the first field that is
            missing or malformed (``model document`` when it is not a JSON object), when the feature
            list differs from this version's :data:`FEATURE_NAMES`, or when an ensemble is larger than
            :data:`MAX_NODES` nodes or a tree deeper than :data:`MAX_DEPTH` levels (checked before
            anything is compiled).
    """
    if not isinstance(document, Mapping):
        raise ModelFileError(
            f"model document: expected a JSON object (the parsed file, e.g. json.loads of its text), got "
            f"{type(document).__name__}"
        )
    if document.get("format") != FORMAT:
        got = document.get("format")
        hint = (
            " (a model file of another ctxutil-otel version: retrain with benchmarks/train_learned.py)"
            if isinstance(got, str) and got.startswith(FORMAT.rsplit("/", 1)[0] + "/")
            else ""
        )
        raise ModelFileError(f"format: expected {FORMAT!r}, got {got!r}{hint}")
    features = document.get("features")
    if not isinstance(features, list):
        raise ModelFileError(f"features: expected a list of feature names, got {type(features).__name__}")
    if features != list(FEATURE_NAMES):
        raise ModelFileError("features: the model was trained on other features than this version computes")
    weights = read_weights(document)
    decision = Decision.from_dict(document.get("decision"))
    provenance = document.get("provenance")
    if not isinstance(provenance, Mapping):
        raise ModelFileError("provenance: expected an object")
    return LearnedModel(
        relevance=_ensemble(document.get("relevance"), len(FEATURE_NAMES), "relevance"),
        utilization=_ensemble(document.get("utilization"), len(FEATURE_NAMES), "utilization"),
        weights=weights,
        decision=decision,
        provenance=dict(provenance),
    )


MODEL_RESOURCE = "learned_judge.json"


@lru_cache(maxsize=1)
def shipped_model() -> LearnedModel:
    """The model shipped in ``ctxutil_otel/data/learned_judge.json`` (loaded and compiled once)."""
    text = resources.files("ctxutil_otel.data").joinpath(MODEL_RESOURCE).read_text(encoding="utf-8")
    return load_model(json.loads(text))
