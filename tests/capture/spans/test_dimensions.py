"""Dimensions on the span path (issue 12 item 2): read once per turn, when it is converted, from the
generation span (model: ``gen_ai.request.model`` > ``gen_ai.response.model`` > OpenInference
``llm.model_name``; provider: ``gen_ai.provider.name`` > ``gen_ai.system`` > ``llm.provider`` >
``llm.system``), the span that closed the turn (chain name), the retrieval span (retriever name) and span
attributes for the ``metric_dimensions`` keys (``<key>``, ``metadata.<key>``, OpenInference's JSON
``metadata``).

Real parts: the real OpenTelemetry SDK (real spans through the processor), the real Evaluator with the
lexical judge; the recorders of tests/capture/conftest.py. ``serve`` is covered by
tests/serve/test_dimensions.py.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from ctxutil_otel.emit import names as n

from .conftest import Harness
from .test_processor import chat_attrs, retrieval_attrs

Make = Callable[..., Harness]


def turn(h: Harness, chat: Mapping[str, Any], chain: Mapping[str, Any] | None = None) -> None:
    with h.tracer.start_as_current_span(
        "faq_chain", attributes={"gen_ai.operation.name": "invoke_workflow", **(chain or {})}
    ):
        with h.tracer.start_as_current_span("kb_retriever", attributes=retrieval_attrs("q", "c1", "c2")):
            pass
        with h.tracer.start_as_current_span("chat", attributes={**chat_attrs("an answer"), **chat}):
            pass


def dims(h: Harness) -> dict[str, str]:
    h.flush()
    (interaction,) = h.interactions
    return dict(interaction.dimensions or {})


@pytest.mark.parametrize(
    ("chat", "model", "provider"),
    [
        (
            {
                "gen_ai.request.model": "req-m",
                "gen_ai.response.model": "resp-m",
                "gen_ai.provider.name": "p1",
                "gen_ai.system": "old",
            },
            "req-m",
            "p1",
        ),
        ({"gen_ai.response.model": "resp-m", "gen_ai.system": "old"}, "resp-m", "old"),
        ({"llm.model_name": "oi-m", "llm.provider": "oi-p", "llm.system": "oi-s"}, "oi-m", "oi-p"),
        ({"llm.model_name": "oi-m", "llm.system": "oi-s"}, "oi-m", "oi-s"),
    ],
    ids=["request_model", "response_model", "openinference", "openinference_system"],
)
def test_model_and_provider_sources(
    make_harness: Make, chat: dict[str, Any], model: str, provider: str
) -> None:
    h = make_harness()
    turn(h, chat)
    found = dims(h)
    assert (found[n.ATTR_REQUEST_MODEL], found[n.ATTR_PROVIDER_NAME]) == (model, provider)
    assert found[n.ATTR_CHAIN_NAME] == "faq_chain"
    assert found[n.ATTR_RETRIEVER_NAME] == "kb_retriever"


@pytest.mark.parametrize(
    ("chain", "chat"),
    [
        ({"prompt_version": "v9"}, {}),
        ({}, {"metadata.prompt_version": "v9"}),
        ({"metadata": json.dumps({"prompt_version": "v9", "other": 1})}, {}),
    ],
    ids=["attribute", "metadata_attribute", "openinference_metadata_json"],
)
def test_metadata_keys_from_span_attributes(
    make_harness: Make, chain: dict[str, Any], chat: dict[str, Any]
) -> None:
    h = make_harness(metric_dimensions=("prompt_version", "tenant"))
    turn(h, chat, chain)
    found = dims(h)
    assert found["ctxutil.metadata.prompt_version"] == "v9"
    assert "ctxutil.metadata.tenant" not in found


def test_without_keys_no_metadata_dimension_and_nothing_unknown(make_harness: Make) -> None:
    h = make_harness()
    turn(h, {}, {"prompt_version": "v9"})
    found = dims(h)
    assert found == {n.ATTR_CHAIN_NAME: "faq_chain", n.ATTR_RETRIEVER_NAME: "kb_retriever"}


def test_the_span_is_read_at_conversion_not_at_on_end(make_harness: Make) -> None:
    """The generation record is buffered as the reader made it (no per-span copy with the sender's
    identity, as before); the response id and the sender come from the span at conversion."""
    h = make_harness()
    turn(h, {"gen_ai.response.id": "chatcmpl-1"})
    h.flush()
    (interaction,) = h.interactions
    assert interaction.response_id == "chatcmpl-1"


def test_numbers_kept_as_given_arrays_not_read(make_harness: Make) -> None:
    """A number stays a number (the emitter keeps it whole or reports ``_OTHER``; cutting its text would
    make a different number); an array attribute is not read (docs/slices.md)."""
    h = make_harness(metric_dimensions=("shard", "ratio", "regions"))
    turn(h, {}, {"shard": 2**62, "ratio": 0.25, "regions": ["eu", "us"]})
    found = dims(h)
    assert found["ctxutil.metadata.shard"] == 2**62
    assert found["ctxutil.metadata.ratio"] == 0.25
    assert "ctxutil.metadata.regions" not in found


def test_a_nan_or_infinite_value_is_no_value_and_the_next_source_is_read(make_harness: Make) -> None:
    # A NaN attribute (or OpenInference JSON metadata's NaN) was the dimension "nan"; it is absent like an
    # array attribute, so the next span's value is read.
    h = make_harness(metric_dimensions=("tenant", "ratio", "level"))
    chain = {"tenant": math.nan, "ratio": math.inf, "metadata": '{"level": NaN}'}
    turn(h, {"tenant": "acme"}, chain)
    found = dims(h)
    assert found["ctxutil.metadata.tenant"] == "acme"  # the generation span's
    assert "ctxutil.metadata.ratio" not in found and "ctxutil.metadata.level" not in found
