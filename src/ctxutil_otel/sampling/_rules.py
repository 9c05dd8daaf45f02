"""Selection rules, the decision: the first rule matching an interaction decides with its own rate.

The rules themselves (:class:`SelectionRule`, :class:`SelectionFacts`, :func:`parse_rules`) live in the
neutral ``ctxutil_otel._selection`` (the settings validate ``CTXUTIL_SELECTION_RULES`` with them) and are
re-exported here. See that module for the conditions and what each capture path knows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .._selection import SelectionDecision, SelectionFacts, SelectionRule, parse_rules
from ._sampler import TraceIdRatioSampler

__all__ = ["SelectionDecision", "SelectionFacts", "SelectionRule", "SelectionRules", "parse_rules"]


class SelectionRules:
    """The ordered rules and the fallback rate: first matching rule decides, else ``sample_rate``.

    Args:
        rules: Rules in priority order (see :func:`parse_rules` for the accepted forms).
        sample_rate: Share of traces evaluated when no rule matches, in [0, 1].

    Raises:
        ValueError: for invalid rules (naming the rule and field) or an invalid ``sample_rate``.
    """

    __slots__ = ("_bound", "_fallback", "_rules", "_samplers")

    def __init__(
        self, rules: str | Sequence[SelectionRule | Mapping[str, object]] = (), *, sample_rate: float = 1.0
    ) -> None:
        self._rules = tuple(parse_rules(rules)) if rules else ()
        self._samplers = tuple(TraceIdRatioSampler(rule.sample_rate) for rule in self._rules)
        self._fallback = TraceIdRatioSampler(sample_rate)
        self._bound = max([self._fallback.bound, *(s.bound for s in self._samplers)])

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
        for i, rule in enumerate(self._rules):
            if rule.matches(facts):
                return SelectionDecision(self._samplers[i].should_sample(trace_id), i)
        return SelectionDecision(self._fallback.should_sample(trace_id), None)
