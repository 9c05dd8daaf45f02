"""The evaluator's outcome counters (not thread-safe: the engine updates and reads them under its lock)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ._stats import EvaluatorStats
from ._types import Outcome

__all__ = ["Tally"]


@dataclass(slots=True)
class Tally:
    """Counts since construction (or since the ``os.fork()`` that re-created it); see
    :class:`~ctxutil_otel.worker.EvaluatorStats` for what each means."""

    captured: int = 0
    sampled_out: int = 0
    evaluated: int = 0
    not_applicable: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    failed: dict[str, int] = field(default_factory=dict)
    emit_errors: int = 0

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def count(self, outcome: Outcome) -> None:
        """One interaction's final outcome ``(kind, detail)``; a missing detail counts as ``unknown``."""
        kind, detail = outcome
        if kind == "evaluated":
            self.evaluated += 1
        elif kind == "not_applicable":
            self.not_applicable += 1
        elif kind == "failed":
            key = detail or "unknown"
            self.failed[key] = self.failed.get(key, 0) + 1
        else:
            self.drop(detail or "unknown")

    def snapshot(
        self, *, in_flight: int, queue_size: int, cpu_throttled_s: float, cpu_throttled: bool
    ) -> EvaluatorStats:
        return EvaluatorStats(
            captured=self.captured,
            sampled_out=self.sampled_out,
            dropped=self.dropped,
            evaluated=self.evaluated,
            not_applicable=self.not_applicable,
            failed=self.failed,
            in_flight=in_flight,
            queue_size=queue_size,
            emit_errors=self.emit_errors,
            cpu_throttled_s=cpu_throttled_s,
            cpu_throttled=cpu_throttled,
        )
