"""The accounting invariant, stated once for every test folder."""

from __future__ import annotations

from ctxutil_otel.worker import EvaluatorStats

__all__ = ["assert_accounted"]


def assert_accounted(stats: EvaluatorStats) -> None:
    """Once idle (nothing queued, nothing in flight), every captured interaction has exactly one outcome:
    ``captured == sampled_out + not_selected + dropped + evaluated + not_applicable + failed``."""
    assert stats.queue_size == 0 and stats.in_flight == 0, stats
    assert stats.captured == (
        stats.sampled_out
        + stats.not_selected
        + stats.dropped_total
        + stats.evaluated
        + stats.not_applicable
        + stats.failed_total
    ), stats
