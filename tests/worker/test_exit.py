"""Interpreter exit: the evaluator's atexit hook flushes pending evaluations within
``shutdown_timeout_s`` and counts the rest. Runs a fresh interpreter per case."""

from __future__ import annotations

import subprocess
import sys
import textwrap

_SCRIPT = textwrap.dedent(
    """
    import asyncio

    from ctxutil_otel.capture import Interaction
    from ctxutil_otel.judges import ChunkVerdict, JudgeResult
    from ctxutil_otel.metric import ContextualUtilization
    from ctxutil_otel.worker import Evaluator

    HANG = {hang}

    class SlowJudge:
        name = "slow"
        model = None

        async def judge(self, query, answer, chunks, *, reasons=True):
            if HANG:
                await asyncio.Event().wait()
            await asyncio.sleep(0.02)  # the judge's own latency
            verdicts = [ChunkVerdict(index=i, is_relevant=True, is_utilized=True) for i in range(len(chunks))]
            return JudgeResult(verdicts=verdicts)

    class PrintingEmitter:
        def emit(self, interaction, result, duration_s):
            print("emitted", interaction.id, result.label, flush=True)

        def observe(self, outcomes, queue_size, cpu_throttled_s=None):
            pass

    evaluator = Evaluator(
        ContextualUtilization(judge=SlowJudge()),
        emitter=PrintingEmitter(),
        max_concurrency=1,
        max_evaluations_per_second=0,
        shutdown_timeout_s={timeout},
    )
    for i in range(5):
        item = Interaction(query="q", answer="a", documents=["d"], trace_id=i, id=str(i))
        assert evaluator.admit(i).submit(item)
    print("exiting", flush=True)
    """
)


def _run(hang: bool, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(hang=hang, timeout=timeout)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_pending_evaluations_are_flushed_at_exit() -> None:
    done = _run(hang=False, timeout=30)
    assert done.returncode == 0, done.stderr
    emitted = sorted(line for line in done.stdout.splitlines() if line.startswith("emitted"))
    assert emitted == [f"emitted {i} pass" for i in range(5)]
    assert "unfinished" not in done.stderr


def test_exit_does_not_wait_past_the_shutdown_timeout() -> None:
    done = _run(hang=True, timeout=0.2)
    assert done.returncode == 0, done.stderr
    assert "emitted" not in done.stdout
    assert "shut down with 5 evaluations unfinished" in done.stderr
