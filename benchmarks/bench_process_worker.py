"""The process worker beside the thread worker, in one run (issue 13): evaluations/s per application process
with the chain near the do-nothing floor, the application process's CPU per evaluation, the child's memory,
and emission's floor (``_emit_floor.py``: the OpenTelemetry SDK's own calls per evaluation, replayed hot
beside ``Emitter.emit``).

    .venv/bin/python benchmarks/bench_process_worker.py [--iterations 2000] [--rounds 10] [--json PATH]
                                                         [--judges openai learned lexical]

The chain, the floor and the method are ``bench_callback.py``'s (imported from it): LangChain's RAG tutorial
chain over the bundled sample, the model answering after ``--model-delay-ms``; ``--rounds`` rounds, in each
every configuration runs one block of ``iterations / rounds`` invocations in a shuffled order; a block's
ratio is its wall time per invocation over the same round's floor (paired); the median over rounds is
reported. Configurations:

* ``baseline`` (no callbacks), ``floor`` (a do-nothing ``BaseCallbackHandler``) and ``floor_again`` (the
  same: an A/A control showing this run's noise);
* per judge (``openai``: ``OpenAIJudge`` against ``tests/support/openai_server.py`` answering after
  ``--judge-delay-ms``, in another process as a remote judge would be; ``learned``; ``lexical``) and per
  worker (``thread``, ``process``): our ``UtilizationCallbackHandler`` at ``sample_rate`` 1.0, no rate cap,
  the shipped CPU budget (``max_worker_cpu_fraction`` 0.03 of a core: it bounds what the application process
  spends either way), ``max_concurrency`` ``--concurrency`` (32: the process worker's OpenAI judge needs more
  than 12 calls in flight for 60/s at 200 ms), ``max_queue_size`` ``--queue-size`` (4: what the worker cannot
  take is dropped ``queue_full`` at once, as in bench_callback.py). The judge is built from the settings
  (``judge``, ``judge_base_url``, ``judge_api_key``) in both modes.

Per row: evaluations finished during its blocks per second; the ratio to the floor; the application
process's CPU per evaluation off the request path (the evaluator's worker thread, read from its CPU clock:
conversion, the pipe and emission in the process worker; all of the judging too in the thread worker;
capture, on the request thread, is excluded); the child's resident memory (VmRSS at the end). The child of
a ``spawn`` start imports the parent's main module (this script, hence LangChain) as ``multiprocessing``
does for every spawned child; ``bare_child_rss_mb`` is the child's VmRSS under a main module that imports
nothing (``python -c``), the package's own share.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support (the judge server) and benchmarks/_common
sys.path.insert(0, str(ROOT / "benchmarks"))

from _common import JudgeServer, Providers, cpu_count, rag_chain, run_block, stats_counts  # noqa: E402
from _emit_floor import emit_floor  # noqa: E402
from bench_callback import FLOOR, Case, Floor, _quiet_environment, timed_rounds, warm_up_judge  # noqa: E402

from ctxutil_otel.capture import UtilizationCallbackHandler  # noqa: E402
from ctxutil_otel.data import load_sample  # noqa: E402
from ctxutil_otel.emit import Emitter  # noqa: E402
from ctxutil_otel.worker import Evaluator  # noqa: E402
from ctxutil_otel.worker._process import ChildProcessJudging  # noqa: E402

MB = 1024 * 1024


def vm_rss_mb(pid: int) -> float | None:
    """Resident memory of process ``pid`` in MB (Linux ``/proc``; else ``None``)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class TimedEmitter:
    """Forwards to an :class:`Emitter`, adding up the CPU its ``emit`` takes on the calling thread (the
    worker thread): the share of the application process's CPU per evaluation that emission is."""

    def __init__(self, emitter: Emitter) -> None:
        self.emitter = emitter
        self.cpu_s = 0.0

    def emit(self, interaction: Any, result: Any, duration_s: float) -> None:
        began = time.thread_time()
        try:
            self.emitter.emit(interaction, result, duration_s)
        finally:
            self.cpu_s += time.thread_time() - began

    def observe(self, *args: Any) -> None:
        self.emitter.observe(*args)


class Worker(Case):
    """Our handler and evaluator with one judge in one worker mode, for the whole run (bench_callback.py's
    ``Ours``, with the judge from the settings)."""

    def __init__(self, judge: str, worker: str, judge_url: str, args: argparse.Namespace) -> None:
        super().__init__(f"{judge}_{worker}")
        self.label = f"ours, {judge} judge, {worker} worker"
        self.providers = providers = Providers.create()
        self.emitter = emitter = TimedEmitter(
            Emitter(
                tracer_provider=providers.tracer_provider,
                meter_provider=providers.meter_provider,
                logger_provider=providers.logger_provider,
            )
        )
        judge_settings: dict[str, Any] = {"judge": judge}
        if judge == "openai":
            judge_settings.update(judge_model="judge-model", judge_base_url=judge_url, judge_api_key="x")
        self.evaluator = Evaluator(
            emitter=emitter,
            worker=worker,
            sample_rate=1.0,
            max_evaluations_per_second=0,
            max_concurrency=args.concurrency,
            max_queue_size=args.queue_size,
            **judge_settings,
        )
        self.handler = UtilizationCallbackHandler(self.evaluator)
        self.evaluations = 0
        self.seconds = 0.0
        self.worker_cpu = 0.0
        self.emit_cpu = 0.0
        self._cpu_at_open = (0.0, 0.0)

    def worker_cpu_s(self) -> float:
        """CPU seconds of the evaluator's worker thread so far (private to the package: read to report)."""
        thread = self.evaluator._engine.thread
        if thread.ident is None or not hasattr(time, "pthread_getcpuclockid"):
            return 0.0
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except OSError:
            return 0.0

    def child_pid(self) -> int | None:
        judging = self.evaluator._engine._judging
        return judging.pid if isinstance(judging, ChildProcessJudging) else None

    def open(self) -> Any:
        self._cpu_at_open = (self.worker_cpu_s(), self.emitter.cpu_s)
        return {"callbacks": [self.handler]}

    def close(self) -> None:
        cpu, emit = self._cpu_at_open
        self.worker_cpu += self.worker_cpu_s() - cpu
        self.emit_cpu += self.emitter.cpu_s - emit
        self.handler.force_flush(120_000)
        self.providers.tracer_provider.force_flush()
        self.providers.logger_provider.force_flush()

    def finished(self) -> int:
        stats = self.handler.stats()
        return stats.evaluated + stats.not_applicable + sum(stats.failed.values())

    def in_blocks(self, finished: int, seconds: float) -> None:
        self.evaluations += finished
        self.seconds += seconds

    def reset(self) -> None:
        self.evaluations, self.seconds, self.worker_cpu, self.emit_cpu = 0, 0.0, 0.0, 0.0

    def details(self) -> dict[str, Any]:
        pid = self.child_pid()
        return {
            "evaluations_per_s": self.evaluations / self.seconds if self.seconds else 0.0,
            "worker_cpu_ms_per_evaluation": self.worker_cpu / self.evaluations * 1e3
            if self.evaluations
            else None,
            "emit_cpu_ms_per_evaluation": self.emit_cpu / self.evaluations * 1e3
            if self.evaluations
            else None,
            "worker_cpu_share": self.worker_cpu / self.seconds if self.seconds else 0.0,
            "child_rss_mb": None if pid is None else vm_rss_mb(pid),
            "evaluator": stats_counts(self.handler.stats()),
        }

    def shutdown(self, timeout_ms: int) -> None:
        self.handler.shutdown(timeout_ms)
        self.providers.shutdown()


_BARE_CHILD = """
import random, sys
from ctxutil_otel.capture import Interaction
from ctxutil_otel.worker import Evaluator
ev = Evaluator(worker="process", judge=sys.argv[1], max_evaluations_per_second=0)
item = Interaction(query="what is it", answer="it is a test", documents=["it is a test"],
                   trace_id=random.getrandbits(128))
ev.admit(item.trace_id).submit(item)
ev.force_flush(120_000)
print(open(f"/proc/{ev._engine._judging.pid}/status").read().split("VmRSS:")[1].split()[0])
ev.shutdown(10_000)
"""


def bare_child_rss_mb(judge: str) -> float | None:
    """The child's VmRSS (MB) with the learned or lexical judge when the main module imports nothing."""
    done = subprocess.run(
        [sys.executable, "-c", _BARE_CHILD, judge], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    try:
        return int(done.stdout.strip().splitlines()[-1]) / 1024
    except (ValueError, IndexError):
        return None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000, help="invocations per configuration")
    parser.add_argument(
        "--rounds", type=int, default=10, help="interleaved rounds (blocks per configuration)"
    )
    parser.add_argument("--warmup", type=int, default=100, help="untimed invocations per configuration first")
    parser.add_argument("--model-delay-ms", type=float, default=1.0, help="chat model wait per call (sleep)")
    parser.add_argument("--judge-delay-ms", type=float, default=200.0, help="judge server answer delay")
    parser.add_argument("--concurrency", type=int, default=32, help="max_concurrency of every row")
    parser.add_argument("--queue-size", type=int, default=4, help="max_queue_size of every row")
    parser.add_argument("--judges", nargs="+", default=["openai", "learned", "lexical"])
    parser.add_argument("--questions", type=int, default=50, help="sample rows cycled through")
    parser.add_argument("--seed", type=int, default=3, help="seed of the block order")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)
    if args.iterations < args.rounds or args.rounds < 1 or args.warmup < 1:
        parser.error("need --rounds >= 1, --iterations >= --rounds, --warmup >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    _quiet_environment()
    rows = load_sample(args.questions)
    chain = rag_chain(rows, args.model_delay_ms / 1000)
    questions = [r["query"] for r in rows]
    with JudgeServer(args.judge_delay_ms / 1000, str(ROOT)) as server:
        warm_up_judge(server.base_url)
        baseline = Case("baseline")
        baseline.label = "no callbacks"
        cases: list[Case] = [baseline, Floor(FLOOR), Floor("floor_again")]
        for judge in args.judges:
            for worker in ("thread", "process"):
                cases.append(Worker(judge, worker, server.base_url, args))
        for case in cases:  # warm-up: the process workers' children start here
            run_block(chain, questions, args.warmup, case.open(), [])
            case.close()
            case.reset()
        configurations = timed_rounds(cases, chain, questions, args)
        for case in cases:
            case.shutdown(5000)
    ratios: dict[str, dict[str, float | None]] = {}
    for judge in args.judges:
        thread = configurations[f"{judge}_thread"]["details"]
        process = configurations[f"{judge}_process"]["details"]
        cpu_t, cpu_p = thread["worker_cpu_ms_per_evaluation"], process["worker_cpu_ms_per_evaluation"]
        ratios[judge] = {
            "evaluations_per_s_process_over_thread": (
                process["evaluations_per_s"] / thread["evaluations_per_s"]
                if thread["evaluations_per_s"]
                else None
            ),
            "cpu_per_evaluation_process_over_thread": cpu_p / cpu_t if cpu_t and cpu_p else None,
        }
    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "environment": {"python": sys.version.split()[0], "cpus": cpu_count(), "load": _load()},
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "configurations": configurations,
        "process_over_thread": ratios,
        "bare_child_rss_mb": {j: bare_child_rss_mb(j) for j in args.judges if j != "openai"},
        "emit_floor": emit_floor(rows),
    }
    print_report(report)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"\nfigures written to {args.json}")
    return 0


def _load() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" 1")[0].strip()
    except OSError:
        return "n/a"


def print_report(report: dict[str, Any]) -> None:
    env, settings = report["environment"], report["settings"]
    print(
        f"\npython {env['python']}, {env['cpus']} CPUs, load at the end {env['load']}; model "
        f"{settings['model_delay_ms']:g} ms, judge server {settings['judge_delay_ms']:g} ms; "
        f"{settings['iterations']} invocations per configuration in {settings['rounds']} rounds"
    )
    header = (
        f"{'configuration':18s} {'x floor':>8s} {'IQR':>13s} {'evals/s':>8s} {'app CPU/eval':>13s} "
        f"{'of it emit':>11s} "
        f"{'worker share':>12s} {'child RSS':>10s}"
    )
    print(header)
    print("-" * len(header))
    for name, row in report["configurations"].items():
        low, high = row["ratio_to_floor_iqr"]
        details = row.get("details") or {}
        line = f"{name:18s} {row['ratio_to_floor']:8.3f} {low:6.3f}-{high:6.3f}"
        if details:
            cpu = details["worker_cpu_ms_per_evaluation"]
            emit = details["emit_cpu_ms_per_evaluation"]
            rss = details["child_rss_mb"]
            line += (
                f" {details['evaluations_per_s']:8.1f} {'n/a' if cpu is None else f'{cpu:.3f} ms':>13s}"
                f" {'n/a' if emit is None else f'{emit:.3f} ms':>11s}"
                f" {details['worker_cpu_share']:11.1%} {'' if rss is None else f'{rss:.0f} MB':>10s}"
            )
        print(line)
    for judge, ratio in report["process_over_thread"].items():
        print(
            f"  {judge}: process/thread evaluations/s x{_f(ratio['evaluations_per_s_process_over_thread'])}, "
            f"application CPU per evaluation x{_f(ratio['cpu_per_evaluation_process_over_thread'])}"
        )
    for judge, rss in report["bare_child_rss_mb"].items():
        print(f"  child RSS, {judge} judge, main module importing nothing: {_f(rss)} MB")
    floor = report["emit_floor"]
    print(
        f"  emission hot (back to back, main thread): Emitter.emit {floor['emit_ms']:.3f} ms per evaluation, "
        f"its {floor['sdk_calls']:g} OpenTelemetry SDK calls alone {floor['sdk_ms']:.3f} ms (the floor); "
        f"Emitter.emit paced (4 per wake-up, 15 wake-ups/s) {floor['emit_paced_ms']:.3f} ms"
    )


def _f(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
