"""Selection rules on the LangChain callback path (issue 12 item 1): the root run's name, tags and
metadata decide, with the first matching rule's own rate; a matching rule's refusal is counted
``not_selected``, no match falls back to ``sample_rate`` (``sampled_out``).

Real parts: LangChain runnables (the LCEL RAG chain of conftest.py), the real Evaluator with the lexical
judge; the recorders of conftest.py. Trace ids are chosen by running the chain under a non-recording
OpenTelemetry span with that trace id (the handler takes the active span's trace id).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext

from ctxutil_otel._selection import SelectionRule
from ctxutil_otel._settings import SettingsError
from ctxutil_otel.capture import UtilizationCallbackHandler
from ctxutil_otel.sampling import TraceIdRatioSampler

from .conftest import QUESTION, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]
_RANDOM = random.Random(12)
TRACE_IDS = [_RANDOM.getrandbits(128) | 1 for _ in range(24)]


def run(rig: Rig, *, trace_id: int | None = None, **config: Any) -> None:
    chain = rag_chain()
    if trace_id is None:
        chain.invoke(QUESTION, config={"callbacks": [rig.handler], **config})
        return
    span = NonRecordingSpan(SpanContext(trace_id=trace_id, span_id=1, is_remote=False))
    with trace.use_span(span):
        chain.invoke(QUESTION, config={"callbacks": [rig.handler], **config})


def judged(rig: Rig) -> int:
    stats = rig.handler.stats()
    return stats.evaluated + stats.not_applicable


@pytest.mark.parametrize(
    ("rule", "selected_config", "other_config"),
    [
        ({"root_name": "support-*"}, {"run_name": "support-faq"}, {"run_name": "search"}),
        ({"tags": ["beta", "canary"]}, {"tags": ["x", "canary"]}, {"tags": ["x"]}),
        ({"metadata": {"tenant": "a"}}, {"metadata": {"tenant": "a"}}, {"metadata": {"tenant": "b"}}),
    ],
    ids=["root_name", "tags", "metadata"],
)
def test_each_condition_selects_and_refuses(
    make_rig: MakeRig, rule: dict[str, Any], selected_config: dict[str, Any], other_config: dict[str, Any]
) -> None:
    # A rule at rate 1 lets through what the fallback rate 0 would not ...
    rig = make_rig(sample_rate=0.0, selection_rules=[{**rule, "sample_rate": 1.0}])
    run(rig, **selected_config)
    run(rig, **other_config)
    rig.flush()
    stats = rig.handler.stats()
    assert judged(rig) == 1 and stats.sampled_out == 1 and stats.not_selected == 0, stats
    assert_accounted(rig)
    # ... and a rule at rate 0 refuses what the fallback rate 1 would take: counted not_selected.
    rig = make_rig(sample_rate=1.0, selection_rules=[{**rule, "sample_rate": 0.0}])
    run(rig, **selected_config)
    run(rig, **other_config)
    rig.flush()
    stats = rig.handler.stats()
    assert judged(rig) == 1 and stats.not_selected == 1 and stats.sampled_out == 0, stats
    assert_accounted(rig)


def test_first_matching_rule_decides(make_rig: MakeRig) -> None:
    rig = make_rig(
        sample_rate=1.0,
        selection_rules=[
            SelectionRule(name="beta", tags=["beta"], sample_rate=1.0),
            SelectionRule(name="tenant-a", metadata={"tenant": "a"}, sample_rate=0.0),
        ],
    )
    run(rig, tags=["beta"], metadata={"tenant": "a"})  # the first rule: selected
    run(rig, metadata={"tenant": "a"})  # the second: not selected
    rig.flush()
    assert judged(rig) == 1 and rig.handler.stats().not_selected == 1
    assert_accounted(rig)


def test_decision_is_deterministic_per_trace_id_within_a_rule(make_rig: MakeRig) -> None:
    rig = make_rig(sample_rate=1.0, selection_rules=[{"root_name": "rag", "sample_rate": 0.5}])
    reference = TraceIdRatioSampler(0.5)
    decided = []
    for trace_id in TRACE_IDS + TRACE_IDS[:6]:  # repeated trace ids get the same answer
        before = rig.handler.stats().not_selected
        run(rig, trace_id=trace_id, run_name="rag")
        decided.append(rig.handler.stats().not_selected == before)
    assert decided == [reference.should_sample(t) for t in TRACE_IDS + TRACE_IDS[:6]]
    assert 0 < sum(decided) < len(decided)  # both answers occur: the test can tell them apart
    rig.flush()
    stats = rig.handler.stats()
    assert judged(rig) == sum(decided) and stats.not_selected == len(decided) - sum(decided)
    assert stats.captured == stats.sampled_out + stats.not_selected + judged(rig) + stats.dropped_total
    assert_accounted(rig)


def test_rules_from_the_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXUTIL_SELECTION_RULES", '[{"name": "off", "tags": ["internal"], "sample_rate": 0}]')
    handler = UtilizationCallbackHandler(max_evaluations_per_second=0)
    try:
        assert [r.name for r in handler.evaluator.settings.selection_rules] == ["off"]
        rag_chain().invoke(QUESTION, config={"callbacks": [handler], "tags": ["internal"]})
        assert handler.force_flush(10_000)
        stats = handler.stats()
        assert stats.captured == 1 and stats.not_selected == 1 and stats.captured == stats.finished
    finally:
        handler.shutdown(5_000)


def test_an_invalid_environment_variable_names_the_variable_rule_and_field(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(
        "CTXUTIL_SELECTION_RULES",
        '[{"tags": ["a"], "sample_rate": 1}, {"name": "b", "rootname": "x", "sample_rate": 1}]',
    )
    with pytest.raises(SettingsError) as info:
        UtilizationCallbackHandler()
    message = str(info.value)
    assert "CTXUTIL_SELECTION_RULES" in message
    assert "rule 1 ('b'): rootname: Extra inputs are not permitted" in message
    monkeypatch.setenv("CTXUTIL_SELECTION_RULES", '[{"root_name": "a", "sample_rate": 2}]')
    with pytest.raises(SettingsError, match=r"rule 0: sample_rate: Input should be less than or equal to 1"):
        UtilizationCallbackHandler()
    monkeypatch.setenv("CTXUTIL_SELECTION_RULES", '[{"root_name": "a"')
    with pytest.raises(SettingsError, match=r"CTXUTIL_SELECTION_RULES.*invalid JSON"):
        UtilizationCallbackHandler()


def test_an_invalid_argument_names_the_argument_rule_and_field() -> None:
    with pytest.raises(SettingsError, match=r"argument selection_rules: .*rule 0: tags: "):
        UtilizationCallbackHandler(selection_rules=[{"tags": [], "sample_rate": 1}])
