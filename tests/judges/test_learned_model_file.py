"""The learned judge's model file (``load_model``): every malformed document is a ``ModelFileError`` naming
the field, never another exception; trees are trees (no shared node), checked in linear time; the loader is
public in ``ctxutil_otel.judges``."""

from __future__ import annotations

import importlib
import json
import math
import re
from functools import lru_cache
from importlib import resources
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxutil_otel import ContextualUtilization, DatasetItem
from ctxutil_otel.judges import LearnedJudge, ModelFileError, _learned_model, load_model
from ctxutil_otel.judges._learned_features import FEATURE_NAMES
from ctxutil_otel.judges._learned_model import Decision

from .test_offline_judges import ANSWER, CHUNKS, QUERY


@lru_cache(maxsize=1)
def _shipped_text() -> str:
    return resources.files("ctxutil_otel.data").joinpath("learned_judge.json").read_text(encoding="utf-8")


def _document() -> dict[str, Any]:
    """A fresh copy of the shipped model document (the tests change it freely)."""
    loaded: dict[str, Any] = json.loads(_shipped_text())
    return loaded


def _small_document() -> dict[str, Any]:
    """The shipped document with each ensemble cut to its first three trees: valid and quick to compile."""
    document = _document()
    for name in ("relevance", "utilization"):
        document[name]["trees"] = document[name]["trees"][:3]
    return document


def _refused(document: Any) -> str:
    with pytest.raises(ModelFileError) as caught:
        load_model(document)
    return str(caught.value)


# --- the document itself ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "kind"),
    [
        ([], "list"),
        (None, "NoneType"),
        ("/home/me/secret-model.json", "str"),  # a path passed by mistake
        (b'{"format": 1}', "bytes"),
        (5, "int"),
    ],
)
def test_a_document_that_is_not_an_object_is_refused_by_type(document: Any, kind: str) -> None:
    message = _refused(document)
    assert message.startswith("model document: expected a JSON object")
    assert kind in message
    assert "secret-model" not in message  # the type, never the content


@pytest.mark.parametrize("features", [None, 5, "relevance", {"a": 1}])
def test_features_that_are_not_a_list_are_refused_naming_features(features: Any) -> None:
    document = _small_document()
    document["features"] = features
    assert _refused(document).startswith("features: expected a list")
    del document["features"]
    assert _refused(document).startswith("features: expected a list")


# --- the decision ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field", ["relevance_threshold", "fallback_threshold", "round_offset", "nothing_fallback"]
)
@pytest.mark.parametrize("value", [-0.01, 1.5, 2, -1e9])
def test_decision_values_outside_0_1_are_refused_naming_field_and_range(field: str, value: float) -> None:
    document = _small_document()
    document["decision"][field] = value
    message = _refused(document)
    assert message.startswith(f"decision.{field}:") and "[0, 1]" in message


@pytest.mark.parametrize("value", [0, 0.0, 1, 1.0])
def test_decision_values_at_the_ends_of_the_range_load(value: float) -> None:
    document = _small_document()
    document["decision"] = dict.fromkeys(document["decision"], value)
    decision = load_model(document).decision
    assert decision == Decision(*[float(value)] * len(document["decision"]))


def test_decision_docstring_names_the_module_of_the_rule() -> None:
    named = re.findall(r"``(ctxutil_otel\.[\w.]+)``", Decision.__doc__ or "")
    assert "ctxutil_otel.judges._learned_decision.decide" in named
    for dotted in named:  # each resolves: module, then attribute
        module, _, attribute = dotted.rpartition(".")
        assert callable(getattr(importlib.import_module(module), attribute))


# --- the ensembles ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("ensemble", ["relevance", "utilization"])
@pytest.mark.parametrize("link", ["identity", "softmax", None])
def test_both_ensembles_must_give_probabilities(ensemble: str, link: Any) -> None:
    # An "identity" link would pass the raw sum on as P(relevant) or P(utilized): values outside [0, 1].
    document = _small_document()
    document[ensemble]["link"] = link
    message = _refused(document)
    assert message.startswith(f"{ensemble}.link:") and "'logit'" in message


# --- the zipf table --------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["nan", "inf", "-inf", "Infinity", "-1", "-0.5"])
def test_zipf_keys_must_be_finite_and_not_negative(key: str) -> None:
    document = _small_document()
    document["zipf"][key] = "someword"
    message = _refused(document)
    assert message.startswith("zipf:") and repr(key) in message


def test_a_zero_zipf_key_loads() -> None:
    document = _small_document()
    document["zipf"]["0"] = "zzyzzyva"
    assert load_model(document).weights["zzyzzyva"] == 8.0  # max(0.5, 8 - 0)


# --- trees -----------------------------------------------------------------------------------------------


def test_a_node_with_two_parents_is_refused_naming_tree_and_node() -> None:
    document = _small_document()
    # Root 0 splits to 1 and 2; both send their left child to node 3: a graph, not a tree.
    document["utilization"]["trees"][2] = [
        [0, 0.5, 1, 2],
        [1, 0.5, 3, 4],
        [2, 0.5, 3, 5],
        [0.1],
        [0.2],
        [0.3],
    ]
    message = _refused(document)
    assert message.startswith("utilization.trees[2][3]: node 3 has two parents (nodes 1 and 2)")


def test_a_split_with_the_same_child_twice_is_refused() -> None:
    document = _small_document()
    document["relevance"]["trees"][0] = [[0, 0.5, 1, 1], [0.25]]
    assert _refused(document).startswith("relevance.trees[0][1]: node 1 has two parents (nodes 0 and 0)")


def test_a_cycle_below_the_root_is_refused() -> None:
    document = _small_document()
    document["relevance"]["trees"][1] = [[0, 0.5, 1, 3], [1, 0.5, 2, 3], [2, 0.5, 1, 3], [0.5]]
    message = _refused(document)
    assert message.startswith("relevance.trees[1][2]: a cycle back to node 1") and "deeper than" in message


def test_a_deep_shared_chain_is_refused_at_once() -> None:
    # 30 levels (within MAX_DEPTH, 32), each node's two children the same next node: 2**30 paths.
    # Before the check it was compiled path by path (18 levels took 16.7 s, 26 never finished):
    # without it this test would not end within pytest's timeout (pyproject.toml). It asserts the
    # refusal and what it names, not a duration.
    chain: list[list[Any]] = [[i % 5, 0.5, i + 1, i + 1] for i in range(30)]
    chain.append([0.0])
    document = _small_document()
    document["relevance"]["trees"][0] = chain
    assert _refused(document).startswith("relevance.trees[0][30]: node 30 has two parents (nodes 29 and 29)")


def test_a_full_tree_is_compiled_once_per_node() -> None:
    # A complete binary tree of depth 10 (2047 nodes): one leaf line per leaf, one split per inner node.
    depth = 10
    inner = 2**depth - 1
    tree: list[list[Any]] = [[i % 7, 0.5, 2 * i + 1, 2 * i + 2] for i in range(inner)]
    tree += [[float(k)] for k in range(2**depth)]
    document = _small_document()
    document["relevance"]["trees"] = [tree]
    ensemble = load_model(document).relevance
    assert ensemble.source.count("s += ") == 2**depth
    assert ensemble.source.count(" <= ") == inner
    assert ensemble.n_trees == 1


def test_the_shipped_model_still_loads_and_scores() -> None:
    model = load_model(_document())
    assert model.relevance.n_trees == model.utilization.n_trees == 150
    # Each ensemble's output is the logistic function of its raw sum of trees: a probability.
    x = [0.5] * len(FEATURE_NAMES)
    for ensemble in (model.relevance, model.utilization):
        assert ensemble(x) == pytest.approx(1.0 / (1.0 + math.exp(-ensemble.raw(x))))
        assert 0.0 < ensemble(x) < 1.0


# --- any damage: a ModelFileError, never another exception ---------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=8,
)


def _draw_path(data: st.DataObject, document: dict[str, Any]) -> tuple[Any, ...]:
    """A path into ``document``, drawn a step at a time (stopping at each level half the time, so the top
    fields are damaged as often as the nodes of a tree)."""
    path: tuple[Any, ...] = ()
    value: Any = document
    while True:
        keys = list(value) if isinstance(value, dict) else list(range(len(value)))
        key = data.draw(st.sampled_from(keys))
        path, value = (*path, key), value[key]
        if not isinstance(value, (dict, list)) or not value or data.draw(st.booleans()):
            return path


@lru_cache(maxsize=1)
def _tiny_document() -> str:
    """The shipped document with one tree per ensemble and a three-key zipf table (JSON text)."""
    document = _small_document()
    for name in ("relevance", "utilization"):
        document[name]["trees"] = [[[0, 0.5, 1, 2], [0.1], [1, 0.25, 3, 4], [0.2], [0.3]]]
    document["zipf"] = dict(list(document["zipf"].items())[:3])
    return json.dumps(document)


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), value=_JSON)
def test_any_damaged_document_is_a_model_file_error_or_loads(data: st.DataObject, value: Any) -> None:
    document = json.loads(_tiny_document())
    path = _draw_path(data, document)
    target: Any = document
    for key in path[:-1]:
        target = target[key]
    if data.draw(st.booleans()) and isinstance(target, dict):
        del target[path[-1]]
    else:
        target[path[-1]] = value
    try:
        model = load_model(document)
    except ModelFileError as exc:
        assert str(exc)
        return
    # What loads is usable: probabilities in [0, 1] from both ensembles.
    row = [0.0] * len(document["features"])
    assert 0.0 <= model.relevance(row) <= 1.0 and 0.0 <= model.utilization(row) <= 1.0


# --- the public API ---------------------------------------------------------------------------------------


async def test_load_model_and_model_file_error_are_public() -> None:
    assert load_model is _learned_model.load_model and ModelFileError is _learned_model.ModelFileError
    assert issubclass(ModelFileError, ValueError)
    document = _document()
    document["decision"]["relevance_threshold"] = 1.0
    document["decision"]["fallback_threshold"] = 1.0
    judge = LearnedJudge(learned_model=load_model(document))
    result = await judge.judge(QUERY, ANSWER, CHUNKS)
    assert not any(v.is_relevant for v in result.verdicts)  # the given decision is the one used
    score = await ContextualUtilization(judge=judge).execute(
        DatasetItem(query=QUERY, actual_output=ANSWER, retrieved_content=CHUNKS)
    )
    assert score.label == "not_applicable"
