"""The process worker under attack (issue 13's review): a hung child behind a full pipe, results that do
not survive JSON, an application that dies under its child, a judge its child cannot import.

Real parts throughout: a real spawned child, real pipes and signals, real subprocesses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import pytest

from ctxutil_otel.judges import JudgeResult
from ctxutil_otel.metric import ContextualUtilization
from tests.support.gate import Address, Gate, pass_gate

from .conftest import MakeEvaluator, _all_verdicts, interaction

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX: signals and process groups")


class ReportThenBlockJudge:
    """Reports each call at a :class:`Gate` (without waiting), then, when the query contains ``block``,
    blocks its event loop (a synchronous sleep): the child stops reading its pipe."""

    name = "report-then-block"
    model: str | None = None

    def __init__(self, address: Address, block_s: float = 120.0) -> None:
        self.address = address
        self.block_s = block_s

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        await pass_gate(self.address, query, wait=False)
        if "block" in query:
            time.sleep(self.block_s)  # noqa: ASYNC251  # blocking the loop is the point; killed long before
        return _all_verdicts(chunks)


@pytest.fixture
def worker_mode() -> str:
    """The tests of this module that build with ``make_evaluator`` are about the process worker only,
    unless they set ``worker`` themselves."""
    return "process"


def test_a_hung_child_behind_a_full_pipe_is_still_killed_in_time(make_evaluator: MakeEvaluator) -> None:
    # The child's loop is blocked, so it reads nothing; then 7 interactions of 48 KB (more than the pipe
    # holds) go down to it. A send on the evaluator's loop blocked there, so the timer that kills a hung
    # child (timeout + grace: 0.05 + 1 s) never fired and force_flush ran out with 8 in flight.
    gate = Gate()
    evaluator = make_evaluator(
        ContextualUtilization(judge=ReportThenBlockJudge(gate.address)),
        max_concurrency=8,
        evaluation_timeout_s=0.05,
        max_worker_cpu_fraction=0,
    )
    blocked = interaction(query="block the loop")
    assert evaluator.admit(blocked.trace_id) and evaluator.submit(blocked)
    assert gate.wait_for_calls(1)  # the child is in the judge, its loop blocked
    big = ["python " * 1750] * 4  # 4 chunks of 12 KB
    for i in range(7):
        item = interaction(query=f"big {i}", documents=[f"{i}-{k} {text}" for k, text in enumerate(big)])
        assert evaluator.admit(item.trace_id) and evaluator.submit(item)
    assert evaluator.force_flush(30_000)  # generous: the contract kills it after 1.05 s
    stats = evaluator.stats()
    assert stats.failed == {"timeout": 1, "worker_crashed": 7} and stats.evaluated == 0
