from __future__ import annotations

import pytest

from ctxutil_otel.sampling import TokenBudget
from tests.support.doubles import FakeClock


def test_admits_until_spent_then_refuses(clock: FakeClock) -> None:
    budget = TokenBudget(1000, clock=clock)
    first = budget.reserve()
    assert first is not None and first == 0.0  # no cost known yet: nothing reserved
    budget.settle(first, 600)
    assert budget.level() == pytest.approx(400)
    second = budget.reserve()
    assert second is not None and second == pytest.approx(600)  # the estimate is the reported cost
    assert budget.level() == pytest.approx(-200)
    assert budget.reserve() is None  # in debt: refused
    budget.settle(second, 600)  # actual == reserved: no change
    assert budget.level() == pytest.approx(-200)
    assert budget.spent == 1200


def test_refills_continuously_at_budget_per_minute(clock: FakeClock) -> None:
    budget = TokenBudget(600, clock=clock)  # 10 tokens per second
    budget.settle(budget.reserve() or 0.0, 700)
    assert budget.level() == pytest.approx(-100)
    assert budget.reserve() is None
    clock.advance(10.0)
    assert budget.level() == pytest.approx(0.0)
    assert budget.reserve() is None  # level must be above zero
    clock.advance(0.5)
    assert budget.reserve() is not None
    clock.advance(3600)
    assert budget.level() <= 600  # capped at one minute's budget


def test_unknown_cost_keeps_the_reservation_and_refund_returns_it(clock: FakeClock) -> None:
    budget = TokenBudget(1000, clock=clock)
    budget.settle(budget.reserve() or 0.0, 100)  # estimate 100
    level = budget.level()
    reserved = budget.reserve()
    assert reserved == pytest.approx(100)
    budget.settle(reserved or 0.0, None)  # e.g. a timeout: spent unknown, estimate stays charged
    assert budget.level() == pytest.approx(level - 100)
    again = budget.reserve()
    budget.refund(again or 0.0)  # dropped before evaluation: nothing spent
    assert budget.level() == pytest.approx(level - 100)


def test_estimate_follows_reported_costs(clock: FakeClock) -> None:
    budget = TokenBudget(10**9, clock=clock)
    budget.settle(budget.reserve() or 0.0, 100)
    for _ in range(50):
        budget.settle(budget.reserve() or 0.0, 1000)
    assert budget.reserve() == pytest.approx(1000, rel=0.01)


@pytest.mark.parametrize("tokens", [0, -5, True])
def test_invalid_budget_is_refused(tokens: int) -> None:
    with pytest.raises(ValueError, match="tokens_per_minute"):
        TokenBudget(tokens)
