"""CpuBudget: a token bucket of CPU-seconds, driven by a fake wall clock and a fake CPU clock."""

from __future__ import annotations

import gc
import threading
import time

import pytest

from ctxutil_otel.sampling import CpuBudget
from tests.support.costly_gc import costly_collections
from tests.support.doubles import FakeClock


@pytest.fixture
def cpu() -> FakeClock:
    return FakeClock(start=3.0)


def test_starts_with_a_full_burst_then_waits_out_the_debt(clock: FakeClock, cpu: FakeClock) -> None:
    budget = CpuBudget(0.1, burst_s=0.02, clock=clock, cpu_clock=cpu)
    assert budget.delay() == 0.0 and budget.level() == pytest.approx(0.02)
    cpu.advance(0.05)  # one unit of work took 50 ms of CPU, in no wall time
    # 30 ms of debt refilled at 0.1 CPU-s per second: 0.3 s.
    assert budget.delay() == pytest.approx(0.3)
    clock.advance(0.1)
    assert budget.delay() == pytest.approx(0.2)  # the same deadline, asked again later
    clock.advance(0.2)
    assert budget.delay() == 0.0 and budget.level() == pytest.approx(0.0, abs=1e-12)


def test_the_pace_is_the_fraction_whatever_each_unit_costs(clock: FakeClock, cpu: FakeClock) -> None:
    for cost in (0.001, 0.004, 0.03):
        budget = CpuBudget(0.05, burst_s=0.02, clock=clock, cpu_clock=cpu)
        began_wall, began_cpu = clock(), cpu()
        for _ in range(200):  # start a unit whenever allowed, waiting as told
            while (wait := budget.delay()) > 0:
                clock.advance(wait)
            cpu.advance(cost)
        spent, wall = cpu() - began_cpu, clock() - began_wall
        # At most the burst plus the refill plus the unit started last (charged after it ran).
        assert spent <= 0.02 + 0.05 * wall + cost + 1e-9, cost
        assert spent >= 0.05 * wall - 1e-9, cost  # and never slower than the budget allows


def test_cpu_spent_while_the_wall_clock_runs_is_charged_net(clock: FakeClock, cpu: FakeClock) -> None:
    budget = CpuBudget(0.5, burst_s=0.02, clock=clock, cpu_clock=cpu)
    for _ in range(10):  # exactly at the budget: 50 ms of CPU per 100 ms of wall time
        clock.advance(0.1)
        cpu.advance(0.05)
        assert budget.delay() == 0.0
    clock.advance(0.1)
    cpu.advance(0.1)  # above it: 50 ms over, less the 20 ms burst in hand
    assert budget.delay() == pytest.approx(0.03 / 0.5)


def test_idle_time_refills_only_up_to_the_burst(clock: FakeClock, cpu: FakeClock) -> None:
    budget = CpuBudget(0.05, burst_s=0.02, clock=clock, cpu_clock=cpu)
    clock.advance(3600.0)  # an idle hour
    assert budget.delay() == 0.0 and budget.level() == pytest.approx(0.02)
    cpu.advance(0.03)
    assert budget.delay() == pytest.approx(0.01 / 0.05)


def test_starts_after_idle_are_paced_by_their_expected_cpu(clock: FakeClock, cpu: FakeClock) -> None:
    budget = CpuBudget(0.05, burst_s=0.02, clock=clock, cpu_clock=cpu)
    assert budget.estimate() == 0.0  # nothing finished yet: nothing expected
    budget.finished(0)
    cpu.advance(0.005)
    budget.finished(0)
    assert budget.estimate() == pytest.approx(0.005)
    clock.advance(10.0)  # idle: both buckets full
    starts = 0
    while budget.delay() == 0.0 and starts < 100:  # units start, none has run yet (no CPU charged)
        budget.started()
        starts += 1
    assert starts == 5  # 20 ms of burst at 5 ms each, the fifth at level zero: not all at once
    assert budget.delay() == pytest.approx(0.005 / 0.05)  # then one per 5 ms / 5% = 0.1 s
    clock.advance(0.1)
    assert budget.delay() == 0.0


def test_the_hold_charges_exactly_the_cpu_spent_only_earlier(clock: FakeClock, cpu: FakeClock) -> None:
    budget = CpuBudget(0.05, burst_s=0.02, clock=clock, cpu_clock=cpu)
    budget.finished(0)
    cpu.advance(0.005)
    budget.finished(0)
    clock.advance(10.0)
    assert budget.delay() == 0.0 and budget.level() == pytest.approx(0.02)  # estimate 5 ms
    budget.started()
    assert budget.level() == pytest.approx(0.015)  # held at the start
    cpu.advance(0.003)  # cheaper than expected
    budget.finished(0)
    assert budget.level() == pytest.approx(0.017)  # charged the 3 ms it took, the rest given back
    assert budget.estimate() == pytest.approx(0.004)  # (5 ms + 3 ms) / 2
    budget.started()
    budget.started()
    assert budget.level() == pytest.approx(0.017 - 0.008)  # two holds of 4 ms
    cpu.advance(0.008)  # the first of the two: dearer than expected, it uses both holds up
    budget.finished(1)  # the other still runs: nothing is given back
    assert budget.level() == pytest.approx(0.017 - 0.008)
    cpu.advance(0.001)  # the other, charged as it runs
    budget.finished(0)
    assert budget.level() == pytest.approx(0.017 - 0.008 - 0.001)  # in all: exactly the CPU spent


def test_the_estimate_is_the_mean_cpu_per_unit_over_the_last_16(clock: FakeClock, cpu: FakeClock) -> None:
    budget = CpuBudget(0.5, clock=clock, cpu_clock=cpu)
    budget.finished(0)
    for cost in [0.5] + [0.001] * 15 + [0.003] * 4:  # a slow first unit (warm-up), then cheap ones
        cpu.advance(cost)
        budget.finished(0)
    # The last 17 finishes span 12 units of 1 ms and 4 of 3 ms: the warm-up has left the window.
    assert budget.estimate() == pytest.approx((12 * 0.001 + 4 * 0.003) / 16)
    budget.start()
    assert budget.estimate() == 0.0


def test_start_measures_from_now_with_a_full_bucket(clock: FakeClock, cpu: FakeClock) -> None:
    budget = CpuBudget(0.1, burst_s=0.02, clock=clock, cpu_clock=cpu)
    cpu.advance(5.0)  # e.g. the CPU a thread spent before it started to be paced
    budget.start()
    assert budget.delay() == 0.0 and budget.level() == pytest.approx(0.02)


def test_default_clocks_measure_the_calling_thread_only(clock: FakeClock) -> None:
    budget = CpuBudget(0.01, burst_s=0.005, clock=clock)  # cpu_clock: the thread's, by default
    budget.start()
    burnt: list[float] = []

    def burn() -> None:  # 50 ms of another thread's CPU: not this thread's
        began = time.thread_time()
        while time.thread_time() - began < 0.05:
            pass
        burnt.append(time.thread_time() - began)

    thread = threading.Thread(target=burn)
    thread.start()
    thread.join()
    assert burnt and burnt[0] >= 0.05
    assert budget.delay() == 0.0  # this thread only waited: well within its 5 ms burst


def test_a_full_garbage_collection_on_the_paced_thread_is_not_its_cpu(clock: FakeClock) -> None:
    # A full collection walks the whole process's heap (0.3 s of CPU for 2 million objects): it falls
    # on whichever thread allocates when it is due. Charged to the worker at 1% of a core, one stopped
    # every evaluation for 30 s (a test of the worker failed its 60 s flush in a long run).
    budget = CpuBudget(0.01, burst_s=0.005, clock=clock)  # the default CPU clock
    budget.start()
    with costly_collections(2, cost_s=0.05) as burnt:
        gc.collect()  # full
    here = threading.current_thread().name
    assert [cpu >= 0.05 for name, cpu in burnt if name == here][:1] == [True]
    assert budget.delay() == 0.0  # within its 5 ms burst: the collection's 50 ms are not charged


def test_a_young_garbage_collection_on_the_paced_thread_is_its_cpu(clock: FakeClock) -> None:
    budget = CpuBudget(0.01, burst_s=0.005, clock=clock)
    budget.start()
    with costly_collections(0, cost_s=0.05) as burnt:
        gc.collect(0)  # scales with recent allocations, on the worker thread mostly its own: charged
    here = threading.current_thread().name
    assert [cpu >= 0.05 for name, cpu in burnt if name == here][:1] == [True]
    assert budget.delay() >= (0.05 - 0.005) / 0.01  # 45 ms of debt beyond the burst, repaid at 1%


@pytest.mark.parametrize("fraction", [0, -0.1, 1.5, float("nan"), True, "0.5"])
def test_rejects_a_fraction_outside_0_to_1(fraction: object) -> None:
    with pytest.raises(ValueError, match="fraction"):
        CpuBudget(fraction)  # type: ignore[arg-type]


@pytest.mark.parametrize("burst", [0.0, -1.0, float("nan")])
def test_rejects_a_burst_that_is_not_positive(burst: float) -> None:
    with pytest.raises(ValueError, match="burst_s"):
        CpuBudget(0.5, burst_s=burst)
