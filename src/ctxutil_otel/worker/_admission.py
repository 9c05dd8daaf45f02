"""The engine's admission chain past its lifecycle and queue checks: selection (sampling and selection
rules), the rate cap and the judge token budget. Not thread-safe: the engine asks under its lock (selection
alone needs no lock)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Literal

from .._accounting import DropReason
from .._error_origin import error_origin
from .._selection import SelectionFacts, SelectionRule
from ..sampling import TokenBucket, TokenBudget, TraceIdRatioSampler
from ..sampling._rules import SelectionRules

__all__ = ["AdmissionChain", "Unselected"]

_log = logging.getLogger("ctxutil_otel.worker")

#: Why an interaction is not evaluated before admission: the fallback rate, a matching rule's rate, or
#: ``capture_error``: deciding raised (a bug of ours or a fact that cannot be compared), counted a drop
#: with that reason, never as a sampling decision.
Unselected = Literal["sampled_out", "not_selected", "capture_error"]


class AdmissionChain:
    """Selection, rate cap and token budget (``reset()`` re-creates the stateful two after a fork)."""

    def __init__(
        self,
        *,
        sample_rate: float,
        selection_rules: Sequence[SelectionRule | Mapping[str, object]],
        rate_limit: float | None,
        token_budget: int | None,
    ) -> None:
        self._sampler = TraceIdRatioSampler(sample_rate)
        # None without rules: the decision is the bare trace-id ratio, as cheap as before rules existed.
        self.selection = SelectionRules(selection_rules, sample_rate=sample_rate) if selection_rules else None
        self._rate_limit = rate_limit
        self._token_budget = token_budget
        self._logged_error = False
        self.reset()

    def reset(self) -> None:
        self._limiter = TokenBucket(self._rate_limit) if self._rate_limit else None
        self.budget = TokenBudget(self._token_budget) if self._token_budget else None

    def unselected(self, trace_id: int, facts: SelectionFacts | None = None) -> Unselected | None:
        """``None`` when selected, else the outcome it would be counted in (``Engine.unselected``)."""
        try:
            selection = self.selection
            if selection is None or facts is None:
                return None if self._sampler.should_sample(trace_id) else "sampled_out"
            decision = selection.decide(trace_id, facts)
            if decision.selected:
                return None
            return "sampled_out" if decision.rule is None else "not_selected"
        except Exception as exc:  # a metadata value whose str() raises, a non-int trace id: a capture bug
            if not self._logged_error:  # once: it may recur on every request
                self._logged_error = True
                _log.error(  # the class and where, never the message: a user's value may have raised it
                    "ctxutil evaluator: selection failed: %s (counted dropped capture_error)",
                    error_origin(exc),
                )
            return "capture_error"

    def limits(self, *, at_capture: bool) -> tuple[DropReason | None, float | None]:
        """``(reason refused, None)`` or ``(None, judge tokens reserved)``: at capture the rate-cap token
        is taken (once per interaction) and the budget only looked at; at submit the rate cap is not asked
        again and the budget's tokens are reserved."""
        if at_capture and self._limiter is not None and not self._limiter.try_acquire():
            return "rate_limited", None
        if self.budget is None:
            return None, None
        if at_capture:
            return ("token_budget" if self.budget.level() <= 0 else None), None
        reserved = self.budget.reserve()
        return ("token_budget" if reserved is None else None), reserved

    def refund(self, reserved: float | None) -> None:
        if self.budget is not None and reserved is not None:
            self.budget.refund(reserved)

    def settle(self, reserved: float | None, spent: int | None) -> None:
        if self.budget is not None and reserved is not None:
            self.budget.settle(reserved, spent)
