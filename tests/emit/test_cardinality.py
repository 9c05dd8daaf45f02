"""Bounded dimensions (issue 12 item 2): values truncated, at most N distinct per dimension."""

from __future__ import annotations

import logging
import threading

import pytest

from ctxutil_otel.emit._cardinality import OVERFLOW_VALUE, CardinalityLimiter


def test_values_past_the_budget_overflow_counted_and_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    limiter = CardinalityLimiter(max_values=2, max_chars=64)
    with caplog.at_level(logging.WARNING, logger="ctxutil_otel.emit"):
        got = [limiter.bound({"tenant": t, "model": "m"})["tenant"] for t in ("a", "b", "c", "a", "d", "b")]
    assert got == ["a", "b", OVERFLOW_VALUE, "a", OVERFLOW_VALUE, "b"]
    assert limiter.overflowed() == {"tenant": 2}
    assert len([r for r in caplog.records if "tenant" in r.getMessage()]) == 1
    assert limiter.bound({"model": "m"}) == {"model": "m"}  # other dimensions unaffected


def test_values_are_truncated_before_counting_and_none_left_out() -> None:
    limiter = CardinalityLimiter(max_values=1, max_chars=4)
    assert limiter.bound({"p": "prompt-v1", "q": None}) == {"p": "prom"}
    assert limiter.bound({"p": "prompt-v2"}) == {"p": "prom"}  # same value after the cut
    assert limiter.overflowed() == {}


def test_never_more_than_the_budget_under_threads() -> None:
    limiter = CardinalityLimiter(max_values=5)
    seen: set[str] = set()
    lock = threading.Lock()

    def work(offset: int) -> None:
        for i in range(200):
            value = limiter.bound({"user": f"u{offset * 1000 + i}"})["user"]
            with lock:
                seen.add(value)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen - {OVERFLOW_VALUE}) == 5
    assert limiter.overflowed() == {"user": 800 - 5}


def test_bounds_are_validated() -> None:
    with pytest.raises(ValueError, match="max_values"):
        CardinalityLimiter(max_values=0)


def test_overflow_is_the_shared_other_value_and_reported() -> None:
    reported: list[tuple[str, int]] = []
    limiter = CardinalityLimiter(max_values=1, on_overflow=lambda name, n: reported.append((name, n)))
    assert OVERFLOW_VALUE == "_OTHER"
    assert limiter.bound({"m": "a"}) == {"m": "a"}
    assert limiter.bound({"m": "b"}) == {"m": "_OTHER"}
    group = {"ctxutil.evaluated.service.name": "x", "ctxutil.evaluated.service.namespace": "ns"}
    assert limiter.bound_group("svc", group) == group
    assert limiter.bound_group("svc", group) == group  # seen before: kept
    assert limiter.bound_group("svc", {"ctxutil.evaluated.service.name": "y"}) == {"svc": "_OTHER"}
    assert reported == [("m", 0), ("m", 1), ("svc", 0), ("svc", 1)]  # 0: the dimension's series starts
    assert limiter.overflowed() == {"m": 1, "svc": 1}
