from __future__ import annotations

import threading

import pytest

from ctxutil_otel.sampling import TokenBucket
from tests.support.doubles import FakeClock


def test_bucket_starts_full_and_refuses_past_the_burst(clock: FakeClock) -> None:
    bucket = TokenBucket(rate=5.0, clock=clock)
    assert bucket.burst == 5.0  # default burst: one second's worth
    assert [bucket.try_acquire() for _ in range(7)] == [True] * 5 + [False] * 2


def test_tokens_refill_at_the_rate_and_cap_at_the_burst(clock: FakeClock) -> None:
    bucket = TokenBucket(rate=2.0, burst=3.0, clock=clock)
    assert all(bucket.try_acquire() for _ in range(3))
    assert not bucket.try_acquire()
    clock.advance(0.4)  # 0.8 tokens: not yet one
    assert not bucket.try_acquire()
    clock.advance(0.1)  # 1.0 token
    assert bucket.try_acquire()
    assert not bucket.try_acquire()
    clock.advance(3600)  # refill is capped at the burst
    assert bucket.available() == pytest.approx(3.0)
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_over_a_window_at_most_burst_plus_rate_times_window_pass(clock: FakeClock) -> None:
    bucket = TokenBucket(rate=10.0, burst=4.0, clock=clock)
    admitted = 0
    for _ in range(1000):  # 1000 attempts over 10 simulated seconds
        admitted += bucket.try_acquire()
        clock.advance(0.01)
    assert admitted == pytest.approx(4 + 10 * 10, abs=1)


def test_slow_rate_below_one_per_second_has_a_burst_of_one(clock: FakeClock) -> None:
    bucket = TokenBucket(rate=0.5, clock=clock)
    assert bucket.burst == 1.0
    assert bucket.try_acquire()
    clock.advance(1.0)
    assert not bucket.try_acquire()
    clock.advance(1.0)
    assert bucket.try_acquire()


def test_acquire_n_tokens_at_once(clock: FakeClock) -> None:
    bucket = TokenBucket(rate=1.0, burst=10.0, clock=clock)
    assert bucket.try_acquire(7)
    assert not bucket.try_acquire(4)
    assert bucket.try_acquire(3)


def test_concurrent_acquires_never_exceed_the_tokens(clock: FakeClock) -> None:
    bucket = TokenBucket(rate=1.0, burst=500.0, clock=clock)  # frozen clock: exactly 500 tokens
    granted = [0] * 20
    start = threading.Barrier(20)

    def worker(i: int) -> None:
        start.wait()
        for _ in range(100):
            granted[i] += bucket.try_acquire()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) == 500


@pytest.mark.parametrize(("rate", "burst"), [(0.0, None), (-1.0, None), (1.0, 0.5)])
def test_invalid_arguments_are_refused(rate: float, burst: float | None) -> None:
    with pytest.raises(ValueError, match=r"rate|burst"):
        TokenBucket(rate, burst=burst)
