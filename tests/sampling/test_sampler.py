from __future__ import annotations

import random

import pytest
from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

from ctxutil_otel.sampling import TraceIdRatioSampler


def _ids(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.getrandbits(128) for _ in range(n)]


def test_same_trace_id_gets_the_same_decision_in_every_instance() -> None:
    ids = _ids(5000, seed=1)
    first = [TraceIdRatioSampler(0.3).should_sample(t) for t in ids]
    second = [TraceIdRatioSampler(0.3).should_sample(t) for t in ids]
    assert first == second
    assert 0 < sum(first) < len(ids)  # a real mix, not a degenerate all/none


def test_decisions_match_opentelemetry_trace_id_ratio_based() -> None:
    # The documented source of the rule: the SDK's TraceIdRatioBased sampler.
    for rate in (0.0, 0.01, 0.1, 0.25, 0.5, 0.999, 1.0):
        ours = TraceIdRatioSampler(rate)
        sdk = TraceIdRatioBased(rate)
        assert ours.bound == sdk.bound
        for trace_id in _ids(2000, seed=int(rate * 1000)):
            expected = sdk.should_sample(None, trace_id, "x").decision is Decision.RECORD_AND_SAMPLE
            assert ours.should_sample(trace_id) is expected


def test_ten_percent_is_a_subset_of_twenty_percent() -> None:
    ids = _ids(20_000, seed=2)
    ten = {t for t in ids if TraceIdRatioSampler(0.1).should_sample(t)}
    twenty = {t for t in ids if TraceIdRatioSampler(0.2).should_sample(t)}
    assert ten
    assert ten <= twenty
    assert len(twenty) > len(ten)


@pytest.mark.parametrize("rate", [0.01, 0.1, 0.5, 0.9])
def test_sampled_share_is_close_to_the_rate(rate: float) -> None:
    ids = _ids(100_000, seed=3)
    sampler = TraceIdRatioSampler(rate)
    share = sum(sampler.should_sample(t) for t in ids) / len(ids)
    # binomial standard deviation is at most 0.0016 here; 0.01 is > 6 sigma
    assert abs(share - rate) < 0.01


def test_only_the_low_64_bits_decide() -> None:
    sampler = TraceIdRatioSampler(0.5)
    for low in _ids(500, seed=4):
        low &= (1 << 64) - 1
        decision = sampler.should_sample(low)
        assert sampler.should_sample((0xDEADBEEF << 64) | low) is decision


def test_rate_zero_samples_nothing_and_rate_one_samples_everything() -> None:
    extremes = [0, 1, (1 << 64) - 1, (1 << 128) - 1, *_ids(1000, seed=5)]
    assert not any(TraceIdRatioSampler(0.0).should_sample(t) for t in extremes)
    assert all(TraceIdRatioSampler(1.0).should_sample(t) for t in extremes)


@pytest.mark.parametrize("rate", [-0.1, 1.01, float("nan"), "0.5", True, None])
def test_invalid_rate_is_refused(rate: object) -> None:
    with pytest.raises(ValueError, match="sample rate"):
        TraceIdRatioSampler(rate)  # type: ignore[arg-type]
