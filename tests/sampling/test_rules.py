"""Selection rules (issue 12 item 1): first match decides with its own rate, else the fallback rate."""

from __future__ import annotations

import json
import random

import pytest

from ctxutil_otel.sampling._rules import SelectionFacts, SelectionRule, SelectionRules, parse_rules
from ctxutil_otel.sampling._sampler import TraceIdRatioSampler

TRACE_IDS = [random.Random(7).getrandbits(128) for _ in range(2000)]


def test_first_matching_rule_decides_and_no_match_falls_back() -> None:
    rules = SelectionRules(
        [
            {"name": "support", "root_name": "support-*", "sample_rate": 1.0},
            {"name": "tenant-a", "metadata": {"tenant": "a"}, "sample_rate": 0.0},
            {"root_name": "support-faq", "sample_rate": 0.0},  # shadowed by the first rule
        ],
        sample_rate=0.25,
    )
    support = SelectionFacts(root_name="support-faq", metadata={"tenant": "a"})
    tenant = SelectionFacts(root_name="search", metadata={"tenant": "a"})
    other = SelectionFacts(root_name="search", metadata={"tenant": "b"})
    assert all(rules.decide(t, support).selected for t in TRACE_IDS)
    assert {rules.decide(t, support).rule for t in TRACE_IDS} == {0}
    assert not any(rules.decide(t, tenant).selected for t in TRACE_IDS)
    fallback = [rules.decide(t, other) for t in TRACE_IDS]
    assert {d.rule for d in fallback} == {None}
    reference = TraceIdRatioSampler(0.25)
    assert [d.selected for d in fallback] == [reference.should_sample(t) for t in TRACE_IDS]


def test_a_rule_decision_is_the_trace_id_ratio_rule() -> None:
    rules = SelectionRules([{"tags": ["beta"], "sample_rate": 0.3}], sample_rate=1.0)
    facts = SelectionFacts(tags=["x", "beta"])
    reference = TraceIdRatioSampler(0.3)
    assert [rules.decide(t, facts).selected for t in TRACE_IDS] == [
        reference.should_sample(t) for t in TRACE_IDS
    ]


@pytest.mark.parametrize(
    ("rule", "facts", "expected"),
    [
        ({"root_name": "rag-*"}, SelectionFacts(root_name="rag-chain"), True),
        ({"root_name": "rag-*"}, SelectionFacts(root_name="RAG-chain"), False),  # case-sensitive
        ({"root_name": "rag-*"}, SelectionFacts(), False),  # unknown fact
        ({"tags": ["a", "b"]}, SelectionFacts(tags=["b"]), True),
        ({"tags": ["a", "b"]}, SelectionFacts(tags=["c"]), False),
        ({"metadata": {"v": "2"}}, SelectionFacts(metadata={"v": 2}), True),  # compared as strings
        ({"metadata": {"v": "2", "t": "x"}}, SelectionFacts(metadata={"v": "2"}), False),  # all keys
        ({"service_name": "app-*"}, SelectionFacts(service_name="app-a"), True),
        ({"service_name": "app-*"}, SelectionFacts(root_name="app-a"), False),  # spans-only condition
        (
            {"attributes": {"llm.model_name": "gpt-4o"}},
            SelectionFacts(attributes={"llm.model_name": "gpt-4o"}),
            True,
        ),
        ({"attributes": {"n": 3}}, SelectionFacts(attributes={"n": "3"}), False),  # exact equality
        ({"root_name": "rag", "tags": ["t"]}, SelectionFacts(root_name="rag", tags=["u"]), False),  # all hold
    ],
)
def test_each_condition(rule: dict[str, object], facts: SelectionFacts, expected: bool) -> None:
    assert SelectionRules([{**rule, "sample_rate": 1.0}], sample_rate=0.0).decide(1, facts).rule == (
        0 if expected else None
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[{"root_name": "a", "sample_rate": 1.5}]',
            "rule 0: sample_rate: Input should be less than or equal to 1",
        ),
        (
            '[{"root_name": "a", "sample_rate": 1}, {"name": "b", "rootname": "x", "sample_rate": 1}]',
            "rule 1 ('b'): rootname: Extra inputs are not permitted",
        ),
        (
            '[{"name": "all", "sample_rate": 0.5}]',
            "rule 0 ('all'): Value error, a rule needs at least one condition",
        ),
        ('[{"root_name": "a"}]', "rule 0: sample_rate: Field required"),
        ('[{"root_name": "a", "sample_rate": 1}', "invalid JSON"),
        ('{"root_name": "a"}', "selection rules: Input should be a valid array"),
    ],
)
def test_errors_name_the_rule_and_field(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        parse_rules(text)
    assert message in str(info.value)


def test_rules_from_json_and_from_code_agree() -> None:
    spec = [{"name": "x", "tags": ["beta"], "sample_rate": 0.5}]
    dumped = [r.model_dump() for r in parse_rules(json.dumps(spec))]
    assert dumped == [r.model_dump() for r in parse_rules(spec)]
    assert dumped == [SelectionRule(name="x", tags=["beta"], sample_rate=0.5).model_dump()]
