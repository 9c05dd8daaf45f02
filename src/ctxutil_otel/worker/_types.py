"""Types shared by the worker's modules: the emitter protocol, the judging protocol, a result's outcome."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from .._accounting import OutcomeKey, checked_error_type
from .._interaction import Interaction
from ..metric._results import MetricEvaluationResult
from ._convert import Rejection

__all__ = ["EvaluationEmitter", "Judged", "Judging", "Lifecycle", "outcome_of"]


class EvaluationEmitter(Protocol):
    """What the evaluator needs from an emitter (``ctxutil_otel.emit.Emitter`` is the real one)."""

    def emit(self, interaction: Interaction, result: MetricEvaluationResult, duration_s: float) -> None: ...

    def observe(
        self,
        outcomes: Callable[[], Mapping[tuple[str, str | None], int]],
        queue_size: Callable[[], int],
        cpu_throttled_s: Callable[[], float] | None = None,
    ) -> None: ...


class Lifecycle(enum.Enum):
    """The engine's one lifecycle state (see ``_engine.py``'s docstring)."""

    RUNNING = "running"
    DRAINING = "draining"
    STOPPED = "stopped"
    DISABLED = "disabled"


@dataclass(frozen=True, slots=True)
class Judged:
    """A result with the seconds its evaluation took where it ran (the process worker's child times its
    own evaluations: the pipe may hold a result back a little to send several at once)."""

    result: MetricEvaluationResult
    duration_s: float


class Judging(Protocol):
    """Where the engine's evaluations run: on its own loop (``worker="thread"``) or in a child process
    (``worker="process"``). Called only from the engine's worker thread."""

    async def evaluate(self, interaction: Interaction) -> MetricEvaluationResult | Judged | Rejection:
        """The result (failures as ``label="error"`` results), timed or not (the engine times it then),
        or the rejection of a non-evaluable one."""
        ...

    def close(self, timeout_s: float) -> None:
        """Release what evaluating holds (the child process), within ``timeout_s`` seconds."""
        ...

    def reset_after_fork(self) -> None:
        """In a forked child: forget what belongs to the parent (never use or stop it)."""
        ...


def outcome_of(result: MetricEvaluationResult) -> OutcomeKey:
    """The accounting outcome of a metric result (label error -> failed with its error_type)."""
    if result.label == "error":
        return ("failed", checked_error_type(result.error_type) if result.error_type else "judge_error")
    if result.label == "not_applicable":
        return ("not_applicable", None)
    return ("evaluated", None)
