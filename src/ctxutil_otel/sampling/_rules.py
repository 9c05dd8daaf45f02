"""Selection rules, the decision: the first rule matching an interaction decides with its own rate.

The rules themselves (:class:`SelectionRule`, :class:`SelectionFacts`, :func:`parse_rules`) live in the
neutral ``ctxutil_otel._selection`` (the settings validate ``CTXUTIL_SELECTION_RULES`` with them) and are
re-exported here. See that module for the conditions and what each capture path knows.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence

from .._selection import SelectionDecision, SelectionFacts, SelectionRule, parse_rules
from ._sampler import TraceIdRatioSampler

__all__ = ["SelectionDecision", "SelectionFacts", "SelectionRule", "SelectionRules", "parse_rules"]


class _Matcher:
    """One rule's conditions compiled to plain values, and the one place they are matched (the decision path
    reads no pydantic attribute: a model's attributes cost microseconds each). Every condition must hold;
    an unknown fact (``None``) fails its condition."""

    __slots__ = ("attributes", "metadata", "root", "service", "tags")

    def __init__(self, rule: SelectionRule) -> None:
        self.root = _glob(rule.root_name)
        self.tags = None if rule.tags is None else frozenset(rule.tags)
        self.metadata = None if rule.metadata is None else tuple(rule.metadata.items())
        self.service = _glob(rule.service_name)
        self.attributes = None if rule.attributes is None else tuple(rule.attributes.items())

    def matches(self, facts: SelectionFacts) -> bool:
        if self.root is not None and (facts.root_name is None or not self.root.match(facts.root_name)):
            return False
        if self.tags is not None and (facts.tags is None or self.tags.isdisjoint(facts.tags)):
            return False
        if self.metadata is not None:
            meta = facts.metadata
            if meta is None or any(k not in meta or str(meta[k]) != v for k, v in self.metadata):
                return False
        if self.service is not None and (
            facts.service_name is None or not self.service.match(facts.service_name)
        ):
            return False
        if self.attributes is not None:
            attrs = facts.attributes
            if attrs is None or any(k not in attrs or attrs[k] != v for k, v in self.attributes):
                return False
        return True


def _glob(pattern: str | None) -> re.Pattern[str] | None:
    return None if pattern is None else re.compile(fnmatch.translate(pattern))


class SelectionRules:
    """The ordered rules and the fallback rate: first matching rule decides, else ``sample_rate``.

    Args:
        rules: Rules in priority order (see :func:`parse_rules` for the accepted forms).
        sample_rate: Share of traces evaluated when no rule matches, in [0, 1].

    Raises:
        ValueError: for invalid rules (naming the rule and field) or an invalid ``sample_rate``.
    """

    __slots__ = ("_bound", "_deciders", "_fallback", "_rules", "_samplers")

    def __init__(
        self, rules: str | Sequence[SelectionRule | Mapping[str, object]] = (), *, sample_rate: float = 1.0
    ) -> None:
        self._rules = tuple(parse_rules(rules)) if rules else ()
        self._samplers = tuple(TraceIdRatioSampler(rule.sample_rate) for rule in self._rules)
        self._fallback = TraceIdRatioSampler(sample_rate)
        self._bound = max([self._fallback.bound, *(s.bound for s in self._samplers)])
        self._deciders = tuple(zip((_Matcher(r) for r in self._rules), self._samplers, strict=True))

    @property
    def rules(self) -> tuple[SelectionRule, ...]:
        return self._rules

    @property
    def bound(self) -> int:
        """The highest trace-id bound of the fallback and every rule: a trace whose low 64 bits are at
        or above it is selected by no rule and not by the fallback (the trace-id ratio decisions nest),
        so a capture path may drop it before reading anything."""
        return self._bound

    def decide(self, trace_id: int, facts: SelectionFacts) -> SelectionDecision:
        """Evaluate this interaction? The first rule matching ``facts`` decides from ``trace_id``; with no
        match, the fallback ``sample_rate`` does. Costs one comparison per rule condition."""
        for i, (matcher, sampler) in enumerate(self._deciders):
            if matcher.matches(facts):
                return SelectionDecision(sampler.should_sample(trace_id), i)
        return SelectionDecision(self._fallback.should_sample(trace_id), None)
