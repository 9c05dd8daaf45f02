"""What only the process worker has: a child process that can die, stop answering, be forked over, and
must get the judge's settings and key without them showing anywhere else. The contract it shares with the
thread worker is proven by the rest of tests/worker, which runs in both modes (``worker_mode``).

Real parts throughout: a real spawned child, real signals, a real OpenAI-compatible server over HTTP.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ctxutil_otel import Settings, SettingsError
from ctxutil_otel.judges import ChunkVerdict, JudgeResult, LearnedJudge
from ctxutil_otel.metric import ContextualUtilization
from ctxutil_otel.worker import Evaluator
from ctxutil_otel.worker._process import ChildProcessJudging
from tests.support.doubles import RecordingEmitter
from tests.support.openai_server import OpenAICompatServer

from .conftest import GateJudge, MakeEvaluator, _all_verdicts, interaction, run_in_forked_child

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="POSIX: signals, /proc and os.fork")


@pytest.fixture
def worker_mode() -> str:
    """Every evaluator of this module is a process worker (overrides the conftest's two modes)."""
    return "process"


def _judging(evaluator: Evaluator) -> ChildProcessJudging:
    """The engine's process judging (private: the tests need the child's pid)."""
    judging = evaluator._engine._judging
    assert isinstance(judging, ChildProcessJudging)
    return judging


def _offer(evaluator: Evaluator, n: int, query: str = "what is python") -> None:
    for _ in range(n):
        item = interaction(query=query)
        assert evaluator.admit(item.trace_id).submit(item)


class ExitingJudge:
    """Ends its process (as a crash would) when a query contains ``crash``; else all chunks used."""

    name = "exiting"
    model: str | None = None

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        if "crash" in query:
            os._exit(3)
        return _all_verdicts(chunks)


class LoopBlockingJudge:
    """Blocks its event loop (synchronous sleep) when a query contains ``block``: the child's own timeout
    cannot fire; else all chunks used."""

    name = "blocking"
    model: str | None = None

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        if "block" in query:
            time.sleep(120)  # noqa: ASYNC251  # blocking the loop is the point; killed long before
        return _all_verdicts(chunks)


class VerboseJudge:
    """Answers at once, every chunk relevant and used, each with a 2,000-character reason: large results."""

    name = "verbose"
    model: str | None = None

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        verdicts = [
            ChunkVerdict(index=i, is_relevant=True, is_utilized=True, reason="r" * 2000)
            for i in range(len(chunks))
        ]
        return JudgeResult(verdicts=verdicts)


def test_large_interactions_and_results_both_ways_do_not_jam_the_pipe(make_evaluator: MakeEvaluator) -> None:
    # Interactions of 300 KB down the pipe, results of about 600 KB back: more than the pipe holds either
    # way. When the child sent its results from its loop, a result blocked on the full pipe (this process
    # busy sending the next interaction, not reading) kept the child from reading, and both waited for ever.
    evaluator = make_evaluator(
        ContextualUtilization(judge=VerboseJudge()), max_concurrency=2, max_worker_cpu_fraction=0
    )
    documents = [f"chunk {i} " + "python " * 140 for i in range(300)]
    for _ in range(8):
        item = interaction(documents=documents)
        assert evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(60_000)
    assert evaluator.stats().evaluated == 8


def test_the_default_metric_passed_explicitly_reaches_the_child(make_evaluator: MakeEvaluator) -> None:
    # The learned judge's trees are compiled with exec: a function pickle cannot find by name, so
    # Evaluator(ContextualUtilization(), worker="process") was refused at construction. They travel as
    # their source now and give the same verdicts in the child.
    judge = LearnedJudge()
    emitter = RecordingEmitter()
    evaluator = make_evaluator(ContextualUtilization(judge=judge), emitter=emitter, max_worker_cpu_fraction=0)
    item = interaction()
    assert evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(60_000)
    assert evaluator.stats().evaluated == 1
    assert item.query is not None and item.answer is not None
    expected = judge.judge_sync(item.query, item.answer, [str(d) for d in item.documents], reasons=False)
    (_, result, _) = emitter.emitted[0]
    breakdown = [(c.index, c.is_utilized) for c in result.signals.chunk_breakdown]
    assert breakdown == [(v.index, v.is_utilized) for v in expected if v.is_relevant]
    assert breakdown  # the example has relevant chunks: the comparison is not of two empty lists


def test_a_killed_child_fails_its_in_flight_evaluations_and_is_replaced(
    make_evaluator: MakeEvaluator,
) -> None:
    judge = GateJudge(skip_word="after")
    emitter = RecordingEmitter()
    evaluator = make_evaluator(ContextualUtilization(judge=judge), emitter=emitter, max_concurrency=3)
    _offer(evaluator, 3)
    assert judge.gate is not None and judge.gate.wait_for_calls(3)  # all three in the child
    first = _judging(evaluator).pid
    assert first is not None and first != os.getpid()
    os.kill(first, signal.SIGKILL)
    assert evaluator.force_flush(30_000)  # the three end failed, without waiting for their timeout
    stats = evaluator.stats()
    assert stats.failed == {"worker_crashed": 3} and stats.evaluated == 0
    assert [(r.label, r.error_type, r.judge_name) for _, r, _ in emitter.emitted] == [
        ("error", "worker_crashed", "gate")
    ] * 3
    _offer(evaluator, 2, query="after the crash")
    assert evaluator.force_flush(60_000)
    stats = evaluator.stats()
    assert stats.evaluated == 2 and stats.failed == {"worker_crashed": 3}
    second = _judging(evaluator).pid
    assert second is not None and second != first
    assert _judging(evaluator).started == 2


def test_a_child_that_crashes_by_itself_is_counted_and_restarted(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(ContextualUtilization(judge=ExitingJudge()), max_concurrency=1)
    _offer(evaluator, 1, query="crash here")
    _offer(evaluator, 1, query="what is python")
    assert evaluator.force_flush(60_000)
    stats = evaluator.stats()
    assert (stats.failed, stats.evaluated) == ({"worker_crashed": 1}, 1)
    assert _judging(evaluator).started == 2


def test_a_child_whose_loop_is_blocked_times_out_and_is_replaced(make_evaluator: MakeEvaluator) -> None:
    emitter = RecordingEmitter()
    evaluator = make_evaluator(
        ContextualUtilization(judge=LoopBlockingJudge()),
        emitter=emitter,
        max_concurrency=1,
        evaluation_timeout_s=0.05,  # the parent's backstop: 0.05 s + 1 s of grace
    )
    _offer(evaluator, 1, query="block the loop")
    _offer(evaluator, 1, query="what is python")
    assert evaluator.force_flush(60_000)
    stats = evaluator.stats()
    assert (stats.failed, stats.evaluated) == ({"timeout": 1}, 1)
    assert emitter.emitted[0][1].error_type == "timeout"
    assert _judging(evaluator).started == 2


def test_the_api_key_reaches_the_child_through_the_pipe_only(make_evaluator: MakeEvaluator) -> None:
    secret = "sk-process-worker-secret"
    with OpenAICompatServer() as server:
        evaluator = make_evaluator(
            judge="openai",
            judge_model="judge-model",
            judge_base_url=server.base_url,
            judge_api_key=secret,
        )
        _offer(evaluator, 1)
        assert evaluator.force_flush(60_000)
        assert evaluator.stats().evaluated == 1
        [request] = server.requests
        assert request.headers["authorization"] == f"Bearer {secret}"
        pid = _judging(evaluator).pid
        assert pid is not None
        assert secret not in os.environ.values()  # the test passed it as an argument, not by environment
        for name in ("cmdline", "environ"):
            assert secret.encode() not in Path(f"/proc/{pid}/{name}").read_bytes(), name
        for process in multiprocessing.active_children():  # the resource tracker too
            if process.pid is not None:
                assert secret.encode() not in Path(f"/proc/{process.pid}/cmdline").read_bytes()


def test_a_forked_application_process_starts_its_own_child(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(judge="lexical")
    _offer(evaluator, 1)
    assert evaluator.force_flush(60_000)
    parents_child = _judging(evaluator).pid

    def child() -> dict[str, Any]:
        # multiprocessing's exit hook terminates what active_children() lists: the parent's child must
        # not be there, or this process's exit would kill it.
        inherited = parents_child in [p.pid for p in multiprocessing.active_children()]
        unstarted = _judging(evaluator).pid is None
        _offer(evaluator, 2)
        flushed = evaluator.force_flush(60_000)
        own = _judging(evaluator).pid
        report = {
            "inherited_in_active_children": inherited,
            "no_child_until_it_evaluates": unstarted,
            "flushed": flushed,
            "evaluated": evaluator.stats().evaluated,
            "own_child": own is not None and own not in (parents_child, os.getpid()),
        }
        report["shutdown"] = evaluator.shutdown(10_000)
        return report

    assert run_in_forked_child(child) == {
        "inherited_in_active_children": False,
        "no_child_until_it_evaluates": True,
        "flushed": True,
        "evaluated": 2,
        "own_child": True,
        "shutdown": True,
    }
    _offer(evaluator, 1)  # the parent's child still serves the parent
    assert evaluator.force_flush(60_000)
    assert evaluator.stats().evaluated == 2
    assert _judging(evaluator).pid == parents_child and _judging(evaluator).started == 1


def test_shutdown_stops_the_child(make_evaluator: MakeEvaluator) -> None:
    evaluator = make_evaluator(judge="lexical")
    _offer(evaluator, 1)
    assert evaluator.force_flush(60_000)
    child = _judging(evaluator)._child
    assert child is not None and child.process.is_alive()
    assert evaluator.shutdown(10_000)
    child.process.join(10)
    assert child.process.exitcode == 0  # it stopped when asked, not killed


def test_a_metric_that_cannot_reach_the_child_is_refused_at_construction() -> None:
    class LockedJudge:
        name = "locked"
        model = None
        lock = threading.Lock()

        def __init__(self) -> None:
            self.own_lock = threading.Lock()

        async def judge(self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True) -> Any:
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="cannot be pickled"):
        Evaluator(ContextualUtilization(judge=LockedJudge()), emitter=RecordingEmitter(), worker="process")


def test_the_worker_setting_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().worker == "thread"
    monkeypatch.setenv("CTXUTIL_WORKER", "process")
    assert Settings().worker == "process"
    monkeypatch.setenv("CTXUTIL_WORKER", "processes")
    with pytest.raises(SettingsError) as info:
        Settings()
    assert "worker" in str(info.value) and "CTXUTIL_WORKER" in str(info.value)


def test_one_interaction_the_child_cannot_read_fails_alone_never_its_batch(
    make_evaluator: MakeEvaluator,
) -> None:
    # An interaction id that is not a string (Interaction is a plain dataclass: nothing checks it before the
    # child) raised in the child's reader while it built the invalid_input failure: the interactions after
    # it in the same message never started, force_flush timed out, and shutdown counted them dropped.
    evaluator = make_evaluator(max_worker_cpu_fraction=0)
    items = [interaction(), interaction(id=5), interaction(), interaction()]  # type: ignore[arg-type]
    for item in items:
        assert evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(30_000)
    stats = evaluator.stats()
    assert stats.evaluated + sum(stats.failed.values()) == 4 and stats.dropped == {}, stats
    assert stats.evaluated >= 3, stats
