"""Request-path cost and memory of ``UtilizationCallbackHandler`` on an LCEL RAG chain (issue 3).

    .venv/bin/python benchmarks/bench_callback.py [--iterations 10000] [--rounds 40] [--json PATH]
                                                   [--skip-third-party] [--check] [--cpu-fraction F]

The chain is LangChain's RAG tutorial shape, ``{"context": retriever | join, "question": passthrough} |
prompt | model | StrOutputParser()`` (nine runs per invoke), built from the demo's real components over the
bundled RAGBench sample: the retriever returns fresh ``Document`` s of the question's recorded chunks, the
chat model answers the recorded answer after ``time.sleep(--model-delay-ms)``. Sleeping, not spinning: a
real model call waits on I/O with the GIL released, so background threads (our evaluator, the other tools'
batch exporters) run during the wait as they would in production; a busy loop would model a CPU-bound
local model instead and leave them no idle time to use.

Configurations, each run for ``--iterations`` invocations in the same process:

* ``baseline``: no callbacks;
* ``floor``: a do-nothing ``BaseCallbackHandler`` (LangChain's own callback dispatch; the reference);
* ``floor_again``: the same, measured as a separate configuration: an A/A control whose distance from 1.0
  shows how much of a ratio this machine's noise can explain;
* ``ctxutil_0.01``: our handler, ``sample_rate`` 0.01, the lexical judge, no rate cap, the default worker
  CPU budget (``max_worker_cpu_fraction`` 0.03);
* ``ctxutil_1.0_io``: our handler, ``sample_rate`` 1.0, ``OpenAIJudge`` against the OpenAI-compatible
  test server answering after ``--judge-delay-ms`` (in a child process, as a remote judge would be),
  ``max_evaluations_per_second`` 0 (rate cap lifted), the default CPU budget (3% of one core;
  ``--cpu-fraction`` sets another), default ``max_concurrency`` (8);
* ``ctxutil_1.0_io_default``: the same judge at the shipped defaults: rate cap 10 evaluations/s and CPU
  budget 3% of one core (no setting passed);
* ``ctxutil_1.0_io_cap10``: rate cap 10/s, CPU budget off (no target: a rate cap alone bounds the
  evaluations, not their CPU). The token bucket refills between blocks, so each block starts with a
  burst of 10: the rate within blocks (reported) is above the cap's steady 10/s;
* ``ctxutil_1.0_io_unlimited``: rate cap and CPU budget both off (no target: the control showing, in the
  same run, what the budget removes; the worker is saturated, about 40 evaluations/s);
* ``langfuse``: Langfuse's LangChain ``CallbackHandler`` (tracing on, keys set, a dead 127.0.0.1 base
  URL, its own ``TracerProvider`` whose span processor exports to a null exporter);
* ``openinference``: OpenInference's ``LangChainInstrumentor`` on a ``TracerProvider`` whose batch
  span processor exports to a null exporter.

Our evaluator emits through real SDK providers that export nowhere (``_common.Providers``). For ours the
report also gives the worker thread's CPU during the blocks (its CPU clock, ``pthread_getcpuclockid``) as
a share of one core, and the seconds it waited on its CPU budget (``cpu_throttled_s``).

Method: ``--rounds`` rounds; in each, every configuration runs ``iterations / rounds`` invocations as one
block, in a shuffled order. Per round, a configuration's figure is the block's wall time per invocation and
its ratio is that divided by the same round's floor (paired, so drift and the load of other processes
cancel); the report gives the median over rounds, plus the CPU time of the invoking thread (which excludes
waiting for the GIL). Each configuration keeps one handler (ours: one evaluator, warm judge client) for the
whole run; after each block, untimed, its evaluator and exporters are flushed so that no backlog runs
during another configuration's block. In the timed rounds our ``max_queue_size`` is ``--queue-size``
(4): the worker is saturated from the first invocations of a block whatever the queue size (by the 200 ms
judge, ``max_concurrency`` 8 in flight, about 40 evaluations/s; or by its CPU budget), which only decides
how long the backlog outlives the block; the refused rest is counted ``dropped: queue_full``. Under the
CPU budget that backlog drains at the budget's pace (untimed), and the bucket refills while the other
configurations run, so each of our blocks starts with the budget's 5 ms burst in hand: in blocks of under
a second the worker's share is above the budget's steady 3% (reported per row). The memory runs use the
default queue (2048).

Memory: (1) resident memory (VmRSS, after ``gc.collect()``) before and after ``--iterations`` consecutive
invocations of our handler with one evaluator, after warm-up, for both of our configurations (at 1.0 the
queue is full at the end: the steady state under sustained load); (2) ``--pending-roots`` root runs that
never end, driven through the handler's callbacks (``on_chain_start`` for the root, then a retriever child
that starts and ends) at ``sample_rate`` 1.0 so that every root is held: RSS at start, once
``--max-pending-runs`` roots are pending, and at the end, with the pending-run count and ``pending_full``
(roots evicted at the bound).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support (the judge server) and benchmarks/_common

from _common import (  # noqa: E402
    JudgeServer,
    Providers,
    cpu_count,
    median,
    percentile,
    rag_chain,
    run_block,
    settled_rss_bytes,
    stats_counts,
)
from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.runnables import Runnable, RunnableConfig  # noqa: E402

from ctxutil_otel import ContextualUtilization, LexicalJudge  # noqa: E402
from ctxutil_otel.capture import UtilizationCallbackHandler  # noqa: E402
from ctxutil_otel.data import load_sample  # noqa: E402
from ctxutil_otel.emit import Emitter  # noqa: E402
from ctxutil_otel.worker import Evaluator  # noqa: E402

MB = 1024 * 1024
FLOOR = "floor"
TARGETS = {"ctxutil_0.01": 1.03, "ctxutil_1.0_io": 1.10}  # issue 3: at most 3% / 10% over the floor
MEMORY_RUN_LIMIT_MB = 20.0


class DoNothingHandler(BaseCallbackHandler):
    """The floor: every callback is the base class's no-op."""


# --- configurations ----------------------------------------------------------------------------------


class Case:
    """One configuration: ``open()`` before a block returns the ``config`` for ``invoke``; ``close()``
    after it; ``details()`` for the report."""

    label = ""

    def __init__(self, name: str) -> None:
        self.name = name

    def open(self) -> RunnableConfig | None:
        return None

    def close(self) -> None:
        pass

    def details(self) -> dict[str, Any]:
        return {}

    def reset(self) -> None:
        """Forget what the warm-up counted."""

    def finished(self) -> int:
        """Evaluations finished so far (ours)."""
        return 0

    def in_blocks(self, finished: int, seconds: float) -> None:
        """Evaluations that finished during a timed block of ``seconds``."""

    def shutdown(self, timeout_ms: int) -> None:
        """After the last block."""


class Floor(Case):
    label = "do-nothing BaseCallbackHandler"

    def open(self) -> RunnableConfig | None:
        return {"callbacks": [DoNothingHandler()]}


class Ours(Case):
    """Our handler and evaluator, one for the whole run (warm judge client and connections, as in a
    long-running service). After each block the evaluator is flushed (untimed), so its backlog never runs
    during another configuration's block; ``queue_size`` bounds that backlog."""

    def __init__(
        self,
        name: str,
        label: str,
        sample_rate: float,
        judge_url: str | None,
        queue_size: int,
        rate_cap: float | None = 0.0,
        cpu_fraction: float | None = None,
    ) -> None:
        """``rate_cap`` / ``cpu_fraction``: ``max_evaluations_per_second`` / ``max_worker_cpu_fraction``,
        ``None`` for the shipped default (not passed)."""
        super().__init__(name)
        self.label, self.sample_rate, self.judge_url = label, sample_rate, judge_url
        if judge_url is None:
            judge: Any = LexicalJudge()
        else:
            from ctxutil_otel import OpenAIJudge

            judge = OpenAIJudge(model="judge-model", base_url=judge_url, api_key="x")
        self.providers = providers = Providers.create()
        emitter = Emitter(
            tracer_provider=providers.tracer_provider,
            meter_provider=providers.meter_provider,
            logger_provider=providers.logger_provider,
        )
        overrides: dict[str, Any] = {}
        if rate_cap is not None:
            overrides["max_evaluations_per_second"] = rate_cap
        if cpu_fraction is not None:
            overrides["max_worker_cpu_fraction"] = cpu_fraction
        evaluator = Evaluator(
            ContextualUtilization(judge=judge),
            emitter=emitter,
            sample_rate=sample_rate,
            max_queue_size=queue_size,
            **overrides,
        )
        self.evaluator = evaluator
        self.handler = UtilizationCallbackHandler(evaluator)
        self.since: Counter[str] = Counter()
        self.blocks = 0
        self.block_evaluations = 0
        self.block_seconds = 0.0
        self.block_worker_cpu = 0.0
        self.block_throttled = 0.0
        self._at_open = (0.0, 0.0)

    def worker_cpu_s(self) -> float:
        """CPU seconds of the evaluator's worker thread so far (Linux; else 0.0). The thread is private to
        the package: read here only to report its share of a core."""
        thread = self.evaluator._engine.thread
        if thread.ident is None or not hasattr(time, "pthread_getcpuclockid"):
            return 0.0
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:  # the thread has ended
            return 0.0

    def open(self) -> RunnableConfig | None:
        self._at_open = (self.worker_cpu_s(), self.handler.stats().cpu_throttled_s)
        return {"callbacks": [self.handler]}

    def close(self) -> None:
        cpu, throttled = self._at_open
        self.block_worker_cpu += self.worker_cpu_s() - cpu
        self.block_throttled += self.handler.stats().cpu_throttled_s - throttled
        self.handler.force_flush(120_000)
        self.providers.tracer_provider.force_flush()
        self.providers.logger_provider.force_flush()
        self.blocks += 1

    def counts(self) -> dict[str, int]:
        """Outcome counts since :meth:`reset` (in_flight and queue_size as they are now)."""
        now = Counter(stats_counts(self.handler.stats()))
        now.update({f"callback_errors.{k}": n for k, n in self.handler.callback_errors.items()})
        delta = {k: n - self.since.get(k, 0) for k, n in now.items() if k not in ("in_flight", "queue_size")}
        return {**delta, "in_flight": now["in_flight"], "queue_size": now["queue_size"]}

    def finished(self) -> int:
        stats = self.handler.stats()
        return stats.evaluated + stats.not_applicable + sum(stats.failed.values())

    def in_blocks(self, finished: int, seconds: float) -> None:
        self.block_evaluations += finished
        self.block_seconds += seconds

    def details(self) -> dict[str, Any]:
        seconds = self.block_seconds
        settings = self.handler.settings
        return {
            "blocks": self.blocks,
            "max_evaluations_per_second": settings.max_evaluations_per_second,
            "max_worker_cpu_fraction": settings.max_worker_cpu_fraction,
            "evaluations_per_s_in_blocks": self.block_evaluations / seconds if seconds else 0.0,
            # closing a block reads the worker's CPU before the flush: the block's own share
            "worker_cpu_share_in_blocks": self.block_worker_cpu / seconds if seconds else 0.0,
            "cpu_throttled_s_in_blocks": self.block_throttled,
            "evaluator": self.counts(),
        }

    def reset(self) -> None:
        self.since = Counter(stats_counts(self.handler.stats()))
        self.since.update({f"callback_errors.{k}": n for k, n in self.handler.callback_errors.items()})
        self.blocks = self.block_evaluations = 0
        self.block_seconds = self.block_worker_cpu = self.block_throttled = 0.0

    def shutdown(self, timeout_ms: int) -> None:
        self.handler.shutdown(timeout_ms)
        self.providers.shutdown()


class Langfuse(Case):
    label = "Langfuse CallbackHandler (exporting nowhere)"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        import langfuse
        from _common import NullSpanExporter
        from langfuse.langchain import CallbackHandler
        from opentelemetry.sdk.trace import TracerProvider

        self.version = getattr(langfuse, "__version__", "?")
        self.exporter = NullSpanExporter()
        self.client = langfuse.Langfuse(
            public_key="pk-lf-bench",
            secret_key="sk-lf-bench",
            base_url="http://127.0.0.1:9",  # dead: nothing may reach it (the exporter is ours)
            tracer_provider=TracerProvider(),  # not the global one
            span_exporter=self.exporter,
        )
        self.handler = CallbackHandler(public_key="pk-lf-bench")
        logging.getLogger("langfuse").setLevel(logging.CRITICAL)  # it cannot name our fake model: says so

    def open(self) -> RunnableConfig | None:
        return {"callbacks": [self.handler]}

    def close(self) -> None:
        self.client.flush()

    def shutdown(self, timeout_ms: int) -> None:
        self.client.shutdown()

    def details(self) -> dict[str, Any]:
        return {"version": self.version, "spans_exported": self.exporter.exported}


class OpenInference(Case):
    label = "OpenInference LangChainInstrumentor (exporting nowhere)"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        from _common import NullSpanExporter
        from openinference.instrumentation.langchain import LangChainInstrumentor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.exporter = NullSpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter))
        self.instrumentor = LangChainInstrumentor()

    def open(self) -> RunnableConfig | None:
        self.instrumentor.instrument(tracer_provider=self.provider)
        return None

    def close(self) -> None:
        self.instrumentor.uninstrument()
        self.provider.force_flush()

    def shutdown(self, timeout_ms: int) -> None:
        self.provider.shutdown()

    def details(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {
            "version": version("openinference-instrumentation-langchain"),
            "spans_exported": self.exporter.exported,
        }


def ours(args: argparse.Namespace, judge_url: str, queue_size: int, controls: bool = False) -> list[Ours]:
    """Our two targeted configurations (rate cap lifted, default CPU budget), and with ``controls`` the I/O
    judge at the shipped defaults, under the rate cap alone, and with neither (informational)."""
    judge = f"OpenAIJudge answering after {args.judge_delay_ms:g} ms"
    one = f"ours, sample_rate 1.0, {judge}"
    fraction = args.cpu_fraction
    budget = "default CPU budget" if fraction is None else f"CPU budget {fraction:g} of a core"
    cases = [
        Ours("ctxutil_0.01", "ours, sample_rate 0.01, lexical judge, no rate cap", 0.01, None, queue_size),
        Ours("ctxutil_1.0_io", f"{one}, no rate cap, {budget}", 1.0, judge_url, queue_size, 0.0, fraction),
    ]
    if controls:
        defaults = f"{one}, defaults (rate cap 10/s, CPU budget 3% of a core)"
        cases.append(Ours("ctxutil_1.0_io_default", defaults, 1.0, judge_url, queue_size, rate_cap=None))
        cap = f"{one}, rate cap 10/s, no CPU budget"
        cases.append(Ours("ctxutil_1.0_io_cap10", cap, 1.0, judge_url, queue_size, 10.0, cpu_fraction=0))
        unlimited = f"{one}, no rate cap, no CPU budget"
        cases.append(Ours("ctxutil_1.0_io_unlimited", unlimited, 1.0, judge_url, queue_size, 0.0, 0))
    return cases


def warm_up_judge(judge_url: str) -> None:
    """One judge call on a throwaway client, on this thread, before any evaluator exists: the openai SDK's
    lazy imports and first-call set-up (a few hundred ms of CPU, once per process) would otherwise be
    charged to the first evaluator's CPU budget and hold its worker for seconds after the warm-up."""
    from ctxutil_otel import OpenAIJudge

    judge = OpenAIJudge(model="judge-model", base_url=judge_url, api_key="x")

    async def once() -> None:
        try:
            await judge.judge("warm-up question", "warm-up answer", ["warm-up chunk"])
        finally:
            await judge.aclose()

    asyncio.run(once())


def build_cases(args: argparse.Namespace, judge_url: str) -> tuple[list[Case], dict[str, str]]:
    baseline = Case("baseline")
    baseline.label = "no callbacks"
    cases: list[Case] = [
        baseline,
        Floor(FLOOR),
        Floor("floor_again"),  # A/A control: its ratio to the floor is this run's noise
        *ours(args, judge_url, args.queue_size, controls=True),
    ]
    skipped: dict[str, str] = {}
    for name, factory, package in (
        ("langfuse", Langfuse, "langfuse"),
        ("openinference", OpenInference, "openinference-instrumentation-langchain"),
    ):
        if args.skip_third_party:
            skipped[name] = "skipped: --skip-third-party"
            continue
        try:
            cases.append(factory(name))
        except ImportError as exc:
            skipped[name] = f"skipped: {package} is not installed ({exc.name}); pip install {package}"
        except Exception as exc:  # an API this script was not written for (tested: see README.md)
            skipped[name] = f"skipped: {package} could not be configured ({type(exc).__name__}: {exc})"
    return cases, skipped


# --- measurement -------------------------------------------------------------------------------------


def timed_rounds(
    cases: list[Case], chain: Runnable[str, str], questions: Sequence[str], args: argparse.Namespace
) -> dict[str, dict[str, Any]]:
    per_block = max(1, args.iterations // args.rounds)
    rng = random.Random(args.seed)
    means: dict[str, list[float]] = {c.name: [] for c in cases}
    cpus: dict[str, list[float]] = {c.name: [] for c in cases}
    latencies: dict[str, list[float]] = {c.name: [] for c in cases}
    for _ in range(args.rounds):
        order = list(cases)
        rng.shuffle(order)
        for case in order:
            config = case.open()
            finished = case.finished()
            seconds, cpu = run_block(chain, questions, per_block, config, latencies[case.name])
            case.in_blocks(case.finished() - finished, seconds)
            case.close()
            means[case.name].append(seconds / per_block)
            cpus[case.name].append(cpu / per_block)
    results: dict[str, dict[str, Any]] = {}
    for case in cases:
        ratios = [m / f for m, f in zip(means[case.name], means[FLOOR], strict=True)]
        to_baseline = [m / b for m, b in zip(means[case.name], means["baseline"], strict=True)]
        cpu_ratios = [m / f for m, f in zip(cpus[case.name], cpus[FLOOR], strict=True)]
        results[case.name] = {
            "label": case.label,
            "status": "ok",
            "invocations": per_block * args.rounds,
            "mean_ms": median(means[case.name]) * 1e3,
            "p50_ms": percentile(latencies[case.name], 50) * 1e3,
            "p99_ms": percentile(latencies[case.name], 99) * 1e3,
            "ratio_to_floor": median(ratios),
            "ratio_to_floor_iqr": [percentile(ratios, 25), percentile(ratios, 75)],
            "ratio_to_floor_rounds": [round(r, 4) for r in ratios],
            "ratio_to_baseline": median(to_baseline),
            "thread_cpu_ms": median(cpus[case.name]) * 1e3,
            "thread_cpu_ratio_to_floor": median(cpu_ratios),
            "details": case.details(),
        }
    return results


def memory_run(
    case: Ours, chain: Runnable[str, str], questions: Sequence[str], args: argparse.Namespace
) -> dict[str, Any]:
    """RSS before and after ``iterations`` consecutive invocations with one handler (after warm-up)."""
    config = case.open()
    run_block(chain, questions, args.warmup, config, [])
    case.close()  # the warm-up's evaluations finish before the start figure
    case.reset()
    before = settled_rss_bytes()
    seconds, _ = run_block(chain, questions, args.iterations, config, [])
    after = settled_rss_bytes()
    at_end, pending = case.counts(), case.handler.pending_runs
    case.shutdown(0)
    delta = None if before is None or after is None else (after - before) / MB
    return {
        "label": case.label,
        "max_queue_size": case.handler.settings.max_queue_size,
        "invocations": args.iterations,
        "mean_ms": seconds / args.iterations * 1e3,
        "rss_start_mb": None if before is None else before / MB,
        "rss_end_mb": None if after is None else after / MB,
        "rss_delta_mb": delta,
        "limit_mb": MEMORY_RUN_LIMIT_MB,
        "within_limit": None if delta is None else delta <= MEMORY_RUN_LIMIT_MB,
        "pending_runs_at_end": pending,
        "evaluator_at_end": at_end,
        "evaluator_after_shutdown": case.counts(),
    }


def never_ending_roots(
    args: argparse.Namespace, questions: Sequence[str], chunks: Sequence[str]
) -> dict[str, Any]:
    """``--pending-roots`` roots that start, run a retriever child to its end, and never end."""
    providers = Providers.create()
    emitter = Emitter(
        tracer_provider=providers.tracer_provider,
        meter_provider=providers.meter_provider,
        logger_provider=providers.logger_provider,
    )
    # Rate cap lifted: the evaluator refuses at capture what it cannot take, and under the default cap
    # all but the first 10 roots would be refused at their first retrieval and never held.
    evaluator = Evaluator(
        ContextualUtilization(judge=LexicalJudge()),
        emitter=emitter,
        sample_rate=1.0,
        max_evaluations_per_second=0,
    )
    handler = UtilizationCallbackHandler(evaluator, max_pending_runs=args.max_pending_runs)
    bound = args.max_pending_runs
    rss: dict[str, float | None] = {}
    start = settled_rss_bytes()
    began = time.perf_counter()
    for i in range(args.pending_roots):
        if i == bound:
            value = settled_rss_bytes()
            rss["rss_at_bound_mb"] = None if value is None else value / MB
        question = questions[i % len(questions)]
        root, child = uuid.uuid4(), uuid.uuid4()
        handler.on_chain_start(None, {"question": question}, run_id=root, parent_run_id=None)
        handler.on_retriever_start(None, question, run_id=child, parent_run_id=root)
        documents = [Document(page_content=text, metadata={"index": k}) for k, text in enumerate(chunks)]
        handler.on_retriever_end(documents, run_id=child, parent_run_id=root)
    seconds = time.perf_counter() - began
    end = settled_rss_bytes()
    stats = handler.stats()
    result = {
        "roots": args.pending_roots,
        "max_pending_runs": bound,
        "documents_per_root": len(chunks),
        "us_per_root": seconds / max(1, args.pending_roots) * 1e6,
        "rss_start_mb": None if start is None else start / MB,
        **rss,
        "rss_end_mb": None if end is None else end / MB,
        "pending_runs": handler.pending_runs,
        "captured": stats.captured,
        "dropped_pending_full": stats.dropped.get("pending_full", 0),
        "dropped_ttl_expired": stats.dropped.get("ttl_expired", 0),
        "callback_errors": handler.callback_errors,
    }
    at_bound = rss.get("rss_at_bound_mb")
    result["rss_growth_after_bound_mb"] = None if end is None or at_bound is None else end / MB - at_bound
    result["bounded"] = handler.pending_runs <= bound
    handler.shutdown(1000)
    providers.shutdown()
    return result


# --- report ------------------------------------------------------------------------------------------


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def print_report(report: dict[str, Any]) -> None:
    env = report["environment"]
    print(
        f"\npython {env['python']}, langchain-core {env['langchain_core']}, {env['cpus']} CPUs; "
        f"model {env['model_delay_ms']:g} ms (sleep), {report['settings']['iterations']} invocations per "
        f"configuration in {report['settings']['rounds']} rounds (median of rounds)"
    )
    header = (
        f"{'configuration':20s} {'mean ms':>8s} {'p50 ms':>8s} {'p99 ms':>8s} {'x floor':>8s} "
        f"{'IQR':>13s} {'x base':>7s} {'cpu ms':>7s} {'cpu x fl':>8s}  target (x floor)"
    )
    print(header)
    print("-" * len(header))
    for name, row in report["configurations"].items():
        if row["status"] != "ok":
            print(f"{name:20s} {row['status']}")
            continue
        target = row.get("target_ratio")
        low, high = row["ratio_to_floor_iqr"]
        verdict = "" if target is None else f"<= {target:.2f}  {'met' if row['target_met'] else 'MISSED'}"
        print(
            f"{name:20s} {row['mean_ms']:8.3f} {row['p50_ms']:8.3f} {row['p99_ms']:8.3f} "
            f"{row['ratio_to_floor']:8.3f} {low:6.3f}-{high:6.3f} {row['ratio_to_baseline']:7.3f} "
            f"{row['thread_cpu_ms']:7.3f} "
            f"{row['thread_cpu_ratio_to_floor']:8.3f}  {verdict}"
        )
    for name, row in report["configurations"].items():
        details = row.get("details", {})
        if "evaluator" in details:
            print(
                f"  {name}: {details['evaluations_per_s_in_blocks']:.1f} evaluations/s finished during its "
                f"blocks, worker CPU {details['worker_cpu_share_in_blocks']:.1%} of a core, waited "
                f"{details['cpu_throttled_s_in_blocks']:.1f} s on its CPU budget; "
                f"outcomes {details['evaluator']}"
            )
    print("\nmemory: consecutive invocations with one handler, after warm-up (RSS after gc.collect())")
    for name, row in report["memory"]["run"].items():
        print(
            f"  {name:16s} {row['invocations']} invocations: RSS {_fmt(row['rss_start_mb'], '.1f')} -> "
            f"{_fmt(row['rss_end_mb'], '.1f')} MB (delta {_fmt(row['rss_delta_mb'], '+.1f')} MB, limit "
            f"{row['limit_mb']:g}); {row['mean_ms']:.3f} ms/invoke; at end: {row['evaluator_at_end']}"
        )
    roots = report["memory"]["never_ending_roots"]
    print(
        f"memory: {roots['roots']} never-ending roots (max_pending_runs {roots['max_pending_runs']}, "
        f"{roots['documents_per_root']} documents each, {roots['us_per_root']:.1f} us per root): RSS "
        f"{_fmt(roots['rss_start_mb'], '.1f')} MB at start, {_fmt(roots.get('rss_at_bound_mb'), '.1f')} MB "
        f"at the bound, {_fmt(roots['rss_end_mb'], '.1f')} MB at the end (growth after the bound "
        f"{_fmt(roots['rss_growth_after_bound_mb'], '+.1f')} MB); pending_runs {roots['pending_runs']}, "
        f"dropped pending_full {roots['dropped_pending_full']} (ttl_expired {roots['dropped_ttl_expired']}), "
        f"callback errors {roots['callback_errors']}"
    )


# --- main --------------------------------------------------------------------------------------------


def _quiet_environment() -> None:
    """Settings come from arguments only: drop CTXUTIL_*, LangSmith and Langfuse variables; keep the
    shutdown warnings of the per-block evaluators and third-party deprecation chatter off the output."""
    for name in list(os.environ):
        if name.startswith(("CTXUTIL_", "LANGFUSE_", "LANGSMITH_", "LANGCHAIN_")) or name == (
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
        ):
            del os.environ[name]
    for logger in ("ctxutil_otel", "langfuse", "opentelemetry"):
        logging.getLogger(logger).setLevel(logging.CRITICAL)
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*deprecated.*")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10_000, help="invocations per configuration")
    parser.add_argument(
        "--rounds", type=int, default=40, help="interleaved rounds (blocks per configuration)"
    )
    parser.add_argument("--warmup", type=int, default=200, help="untimed invocations per configuration first")
    parser.add_argument("--model-delay-ms", type=float, default=1.0, help="chat model wait per call (sleep)")
    parser.add_argument("--judge-delay-ms", type=float, default=200.0, help="judge server answer delay")
    parser.add_argument(
        "--queue-size", type=int, default=4, help="our max_queue_size in the timed rounds (backlog bound)"
    )
    parser.add_argument(
        "--cpu-fraction",
        type=float,
        default=None,
        help="max_worker_cpu_fraction of the ctxutil_1.0_io row (default: the shipped default)",
    )
    parser.add_argument("--questions", type=int, default=50, help="sample rows cycled through")
    parser.add_argument("--pending-roots", type=int, default=100_000, help="never-ending roots to start")
    parser.add_argument("--max-pending-runs", type=int, default=10_000, help="the handler's bound for them")
    parser.add_argument("--skip-third-party", action="store_true", help="skip Langfuse and OpenInference")
    parser.add_argument("--seed", type=int, default=3, help="seed of the block order")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    if args.iterations < args.rounds or args.rounds < 1 or args.warmup < 1 or args.pending_roots < 1:
        parser.error("need --rounds >= 1, --iterations >= --rounds, --warmup >= 1, --pending-roots >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _quiet_environment()
    from importlib.metadata import version

    rows = load_sample(args.questions)
    chain = rag_chain(rows, args.model_delay_ms / 1000)
    questions = [r["query"] for r in rows]
    memory: dict[str, Any] = {"run": {}}
    with JudgeServer(args.judge_delay_ms / 1000, str(ROOT)) as server:
        warm_up_judge(server.base_url)
        cases, skipped = build_cases(args, server.base_url)
        for name, message in skipped.items():
            print(f"{name}: {message}", file=sys.stderr)
        for case in cases:  # warm-up
            run_block(chain, questions, args.warmup, case.open(), [])
            case.close()
            case.reset()
        for case in ours(args, server.base_url, 2048):  # the default max_queue_size
            memory["run"][case.name] = memory_run(case, chain, questions, args)
        configurations: dict[str, dict[str, Any]] = timed_rounds(cases, chain, questions, args)
        for case in cases:
            case.shutdown(1000)
    memory["never_ending_roots"] = never_ending_roots(args, questions, rows[0]["retrieved_content"])
    for name, message in skipped.items():
        configurations[name] = {"status": message}
    for name, limit in TARGETS.items():
        row = configurations[name]
        row["target_ratio"] = limit
        row["target_met"] = row["ratio_to_floor"] <= limit
    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "environment": {
            "python": sys.version.split()[0],
            "langchain_core": version("langchain-core"),
            "cpus": cpu_count(),
            "model_delay_ms": args.model_delay_ms,
            "judge_delay_ms": args.judge_delay_ms,
        },
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "configurations": configurations,
        "memory": memory,
    }
    report["targets_met"] = all(configurations[n]["target_met"] for n in TARGETS) and all(
        row["within_limit"] is not False for row in memory["run"].values()
    )
    print_report(report)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json}")
    return 1 if args.check and not report["targets_met"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
