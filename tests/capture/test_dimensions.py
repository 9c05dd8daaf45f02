"""Dimensions on the LangChain callback path (issue 12 item 2): the answering model and its provider
(LangChain's own ``ls_model_name`` / ``ls_provider``, set by a real chat model), the root chain's name, the
retriever's name and the ``metric_dimensions`` keys of the run's metadata, read once per interaction.

Real parts: LangChain runnables and a real ``BaseChatModel`` (``FakeListChatModel`` subclassed with a
``model`` field, whose standard params LangChain derives itself: ``ChatAcme`` -> provider ``acme``), the
real Evaluator; the shared recording emitter keeps the interaction (tests/emit covers emission).
"""

from __future__ import annotations

import decimal
import logging
from collections.abc import Callable

import numpy
import pytest
from langchain_core.language_models import FakeListChatModel
from langchain_core.runnables import RunnableLambda

from ctxutil_otel._dimension_keys import dimension_text, metadata_dimension
from ctxutil_otel.capture import _extract
from ctxutil_otel.capture.spans import _dimensions as spans_dimensions
from ctxutil_otel.emit import names as n
from ctxutil_otel.worker import _record

from .conftest import ANSWER, QUESTION, FixedRetriever, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]


class ChatAcme(FakeListChatModel):
    """A real chat model double with a model name: LangChain puts ``ls_model_name`` = ``model`` and
    ``ls_provider`` = ``acme`` (from the class name) into the run's metadata."""

    model: str = "acme-large-2"


class DocsRetriever(FixedRetriever):
    """The fixed retriever under its own class name (the retriever run's name)."""


def test_model_provider_chain_retriever_and_metadata_keys(make_rig: MakeRig) -> None:
    rig = make_rig(metric_dimensions=("prompt_version", "tenant", "absent", "big", "regions"))
    chain = rag_chain(DocsRetriever(), ChatAcme(responses=[ANSWER])).with_config(run_name="faq_chain")
    metadata = {"prompt_version": "v3", "tenant": 42, "x": "y", "big": 10**30, "regions": ["eu", "us"]}
    chain.invoke(QUESTION, config={"callbacks": [rig.handler], "metadata": metadata})
    interaction, _ = rig.only()
    assert interaction.dimensions == {
        n.ATTR_REQUEST_MODEL: "acme-large-2",
        n.ATTR_PROVIDER_NAME: "acme",
        n.ATTR_CHAIN_NAME: "faq_chain",
        n.ATTR_RETRIEVER_NAME: "DocsRetriever",
        "ctxutil.metadata.prompt_version": "v3",
        "ctxutil.metadata.tenant": 42,  # numbers as given: the emitter keeps them whole or reports _OTHER
        "ctxutil.metadata.big": 10**30,  # (a cut 10**30 would be a different number); lists are not read
    }
    assert_accounted(rig)


def test_the_answering_model_is_the_last_one_not_a_query_writer(make_rig: MakeRig) -> None:
    class ChatWriter(FakeListChatModel):
        model: str = "writer-small"

    rig = make_rig()
    rewrite = ChatWriter(responses=[QUESTION]) | RunnableLambda(lambda m: m.content)
    chain = rewrite | rag_chain(model=ChatAcme(responses=[ANSWER]))
    chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    interaction, _ = rig.only()
    assert interaction.dimensions is not None
    assert interaction.dimensions[n.ATTR_REQUEST_MODEL] == "acme-large-2"
    assert interaction.dimensions[n.ATTR_PROVIDER_NAME] == "acme"


def test_unknown_dimensions_are_absent_and_no_keys_no_metadata(make_rig: MakeRig) -> None:
    rig = make_rig()  # no metric_dimensions
    chain = rag_chain()  # FakeListChatModel: no model name; provider from its class name
    chain.invoke(QUESTION, config={"callbacks": [rig.handler], "metadata": {"prompt_version": "v3"}})
    interaction, _ = rig.only()
    dims = dict(interaction.dimensions or {})
    assert n.ATTR_REQUEST_MODEL not in dims
    assert not [k for k in dims if k.startswith("ctxutil.metadata.")]
    assert dims[n.ATTR_RETRIEVER_NAME] == "FixedRetriever"
    assert dims[n.ATTR_CHAIN_NAME] == "RunnableSequence"


def test_dimensions_with_selection_rules_read_the_same_root_name(make_rig: MakeRig) -> None:
    rig = make_rig(selection_rules=[{"root_name": "faq*", "sample_rate": 1.0}], sample_rate=0.0)
    chain = rag_chain(model=ChatAcme(responses=[ANSWER])).with_config(run_name="faq_chain")
    chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    interaction, _ = rig.only()
    assert (interaction.dimensions or {})[n.ATTR_CHAIN_NAME] == "faq_chain"


def test_a_nan_or_infinite_metadata_value_is_no_dimension(make_rig: MakeRig) -> None:
    # metadata={"tenant": float("nan")} (a DataFrame's missing value) became the dimension "nan".
    rig = make_rig(metric_dimensions=("tenant", "ratio", "shard"))
    metadata = {"tenant": float("nan"), "ratio": numpy.inf, "shard": numpy.float64("nan")}
    rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler], "metadata": metadata})
    interaction, _ = rig.only()
    assert not [k for k in interaction.dimensions or {} if k.startswith("ctxutil.metadata.")]
    assert_accounted(rig)


def test_a_dimension_kept_as_text_has_one_rule_on_both_capture_paths() -> None:
    # The model, provider and retriever names (this path's and the span processor's) are made by one
    # function: a number is its text, a NaN or infinite number is no dimension, as an empty string is none.
    values = ["gpt-4o", 4, 0.5, True, float("nan"), numpy.inf, numpy.float32("-inf"), "", None, ["x"]]
    texts = ["gpt-4o", "4", "0.5", "True", None, None, None, None, None, None]
    assert [dimension_text(value) for value in values] == texts
    assert _extract.dimension_text is spans_dimensions.dimension_text is dimension_text


def test_numpy_metadata_values_are_dimensions_as_python_numbers(make_rig: MakeRig) -> None:
    # numpy.int64, numpy.int32, numpy.float32 and numpy.bool_ (a DataFrame row's values) silently gave no
    # dimension: only int, float and bool were taken (numpy.float64 worked, as a float subclass).
    rig = make_rig(metric_dimensions=("shard", "replica", "ratio", "cached", "missing"))
    metadata = {
        "shard": numpy.int64(7),
        "replica": numpy.int32(2),
        "ratio": numpy.float32(0.5),
        "cached": numpy.bool_(True),
        "missing": numpy.float32("nan"),
    }
    rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler], "metadata": metadata})
    interaction, _ = rig.only()
    found = {k: v for k, v in (interaction.dimensions or {}).items() if k.startswith("ctxutil.metadata.")}
    assert found == {
        "ctxutil.metadata.shard": 7,
        "ctxutil.metadata.replica": 2,
        "ctxutil.metadata.ratio": 0.5,
        "ctxutil.metadata.cached": True,
    }
    assert [type(v) for v in found.values()] == [int, int, float, bool]  # Python's, not numpy's
    assert_accounted(rig)


def test_a_metadata_value_of_a_type_giving_no_dimension_is_logged_once_per_key(
    make_rig: MakeRig, caplog: pytest.LogCaptureFixture
) -> None:
    # A metric_dimensions key present with a list or a Decimal gave no dimension and nothing said why.
    rig = make_rig(metric_dimensions=("regions_c1", "price_c1", "absent_c1", "empty_c1"))
    metadata = {"regions_c1": ["private-eu"], "price_c1": decimal.Decimal("9.5"), "empty_c1": None}
    with caplog.at_level(logging.WARNING, logger="ctxutil_otel"):
        for _ in range(2):
            rag_chain().invoke(QUESTION, config={"callbacks": [rig.handler], "metadata": metadata})
    messages = [r.getMessage() for r in caplog.records if "metric_dimensions key" in r.getMessage()]
    assert messages == [
        f"ctxutil: metric_dimensions key {key!r} has a value of type {type_name}, which gives no dimension "
        f"(strings, numbers and booleans do): results carry no ctxutil.metadata.{key} for it (logged once "
        "per key)"
        for key, type_name in (("regions_c1", "list"), ("price_c1", "Decimal"))
    ]
    assert not any("private" in m for m in messages)


def test_metadata_dimensions_have_one_rule_on_every_capture_path() -> None:
    assert _extract.metadata_dimension is spans_dimensions.metadata_dimension is metadata_dimension
    assert _record.metadata_dimension is metadata_dimension
