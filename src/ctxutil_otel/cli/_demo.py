"""``ctxutil-otel demo``: the main job, end to end on the bundled RAGBench sample.

A real LangChain LCEL RAG chain (recorded retriever -> prompt -> replaying chat model -> parser) runs
over the sample with :class:`~ctxutil_otel.UtilizationCallbackHandler` attached. The evaluator judges
each interaction off the request path and emits OpenTelemetry telemetry: over OTLP when
``OTEL_EXPORTER_OTLP_ENDPOINT`` (or a per-signal endpoint) is set; printed to the console, one line per
span, log event and metric point, only with ``--show-telemetry`` (or ``OTEL_*_EXPORTER=console``), so what
a first run shows is the result. The demo ends with that result, headed ``Results``: per-question score and
chunk counts, mean utilization, pass rate, agreement with the labels, the evaluator's accounting (dropped /
failed), and a last line saying how much telemetry was made and where it went.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig

from .._interaction import Interaction
from .._settings import Settings, SettingsError
from ..emit._endpoints import unreachable_otlp_endpoints
from ..emit._from_settings import build_emitter
from ..metric._agreement import AgreementReport, LabelledRow, agreement
from ..metric._results import MetricEvaluationResult
from ._io import enumerated, judge_choices

if TYPE_CHECKING:
    from ..emit._setup import TelemetryHandle
    from ..worker._evaluator import Evaluator
    from ._export_tally import ExportTally

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "demo",
        help="run a LangChain RAG chain over the bundled sample with live evaluation (the main job)",
        description="Run a real LangChain LCEL RAG chain over the bundled RAGBench sample with the "
        "UtilizationCallbackHandler attached; evaluate off the request path; export telemetry over OTLP "
        "when OTEL_EXPORTER_OTLP_ENDPOINT is set (printed with --show-telemetry); end with the results "
        "table. Evaluator settings (sample rate, queue, concurrency, ...) come from CTXUTIL_* variables.",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=20,
        help="questions to run (default 20; 0 = every distinct question of the data)",
    )
    parser.add_argument(
        "--data", type=Path, default=None, help="a RAGBench-style JSONL file instead of the sample"
    )
    parser.add_argument(
        "--judge",
        type=enumerated,
        choices=judge_choices(),
        default=None,
        help="default: CTXUTIL_JUDGE, else semantic (learned, with one warning, without the "
        "'semantic' extra)",
    )
    parser.add_argument("--model", default=None, help="judge model for --judge openai")
    parser.add_argument("--base-url", default=None, help="OpenAI-compatible endpoint for --judge openai")
    parser.add_argument("--sample-rate", type=float, default=None, help="share of interactions evaluated")
    parser.add_argument("--capture-content", action="store_true", help="emit chunk/query/answer text too")
    parser.add_argument(
        "--loop",
        action="store_true",
        help="keep running the questions every --interval seconds until SIGTERM/Ctrl-C (a live sender for "
        "dashboards: rate() needs a long-running process)",
    )
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between passes with --loop")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument(
        "--show-telemetry",
        action="store_true",
        help="also print the telemetry (one line per span, log event and metric point) to stdout, before "
        "the results, for each signal that has no OTLP endpoint",
    )
    shown.add_argument(
        "--quiet",
        action="store_true",
        help="print no telemetry to the console: the default (kept for existing scripts)",
    )
    parser.set_defaults(func=run)


class _Collecting:
    """Wraps the real Emitter: emits as usual and keeps each result for the summary (keyed by query)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.results: dict[str, MetricEvaluationResult] = {}

    def emit(
        self, interaction: Interaction, result: MetricEvaluationResult, duration_s: float, **kwargs: Any
    ) -> None:
        self.results[str(interaction.query)] = result
        self.inner.emit(interaction, result, duration_s, **kwargs)

    def observe(self, *args: Any, **kwargs: Any) -> None:
        self.inner.observe(*args, **kwargs)


def _load_rows(path: Path | None, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The rows to replay (first of repeated questions kept, at most ``limit``) and the count of bad lines."""
    from ..data import load_sample
    from ._io import Line, read_items, report_bad_line

    bad = 0
    if path is None:
        rows = load_sample()
    else:
        rows = []
        for entry in read_items(path):
            if isinstance(entry, Line):
                rows.append(entry.row)
            else:
                report_bad_line(path, entry)
                bad += 1
    unique: dict[str, dict[str, Any]] = {}
    for row in rows:  # the replaying parts key by question: keep the first of repeated questions
        unique.setdefault(row["query"], row)
    picked = list(unique.values())
    return (picked[:limit] if limit > 0 else picked), bad


_ROW = "{:>3}  {:<22} {:>6} {:>8} {:>4} {:>5} {:<15} {:>8}"


def _detail(counts: Mapping[str, int]) -> str:
    return f" {dict(counts)}" if counts else ""


def _cell(value: float | None, fmt: str = ".2f") -> str:
    return "n/a" if value is None or math.isnan(value) else format(value, fmt)


def _stop_on_signals() -> threading.Event:
    """Install SIGTERM/SIGINT handlers for ``--loop``: the first sets the returned event (the current pass
    finishes, then the caller flushes within its deadline); a second exits at once with 128 + signal,
    like ``serve``."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        if stop.is_set():
            os._exit(128 + signum)
        stop.set()
        print("ctxutil-otel demo: stopping after this pass (again to exit at once)", file=sys.stderr)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)
    return stop


def _loop(run_pass: Callable[[], object], interval_s: float, stop: threading.Event) -> int:
    """Call ``run_pass`` now and then every ``interval_s`` seconds until ``stop`` is set; returns the
    number of passes run."""
    run_pass()
    passes = 1
    while not stop.wait(max(0.0, interval_s)):
        run_pass()
        passes += 1
    return passes


def _settings(args: argparse.Namespace) -> Settings:
    """The demo's settings: its flags > ``CTXUTIL_*`` > the demo's defaults > the library's.

    The demo's defaults, each only while its variable is unset: no rate cap (the batch arrives at once),
    no worker CPU budget (a batch run has no request path to protect), application name ``ctxutil-demo``.
    Raises :class:`SettingsError` naming the setting and its variable.
    """
    overrides: dict[str, Any] = {}
    for name, value in (
        ("judge", args.judge),
        ("judge_model", args.model),
        ("judge_base_url", args.base_url),
        ("sample_rate", args.sample_rate),
    ):
        if value is not None:
            overrides[name] = value
    if args.capture_content:
        overrides["capture_content"] = True
    return Settings(**overrides).with_defaults(
        max_evaluations_per_second=0, max_worker_cpu_fraction=0, application_name="ctxutil-demo"
    )


_NOT_EXPORTED = (
    "not printed or sent (--show-telemetry prints it; OTEL_EXPORTER_OTLP_ENDPOINT sends it over OTLP)"
)


def _destinations(destinations: Mapping[str, Sequence[str]]) -> str | None:
    """``"traces: console, metrics: otlp/grpc, logs: nowhere"``; ``None`` when every signal goes nowhere."""
    if not any(destinations.values()):
        return None
    return ", ".join(f"{k}: {'+'.join(v) or 'nowhere'}" for k, v in destinations.items())


def _telemetry_line(
    destinations: str | None,
    made: str,
    exports: ExportTally,
    finished: bool,
    budget_s: float,
    unreachable: Sequence[str],
) -> str:
    """The summary's last line: how much telemetry was made, where it went and how its export at exit
    ended, from the exporters' results (``exports``) and whether the shutdown finished in time
    (``finished``); ``destinations`` ``None``: nowhere."""
    if destinations is None:
        return f"telemetry: {made} made, {_NOT_EXPORTED}"
    failures = exports.failures()
    problems = [failures] if failures else []
    if not finished:
        problems.append(f"export unfinished after {budget_s:g} s: what was still being sent is lost")
    if problems and unreachable:
        problems.append("an OTLP endpoint did not accept a connection at the start")
    if problems:
        return f"telemetry ({destinations}): {made}; {'; '.join(problems)}"
    if not exports.delivered:
        return f"telemetry ({destinations}): {made}; nothing exported"
    return f"telemetry ({destinations}): {made}; {exports.deliveries()} within {budget_s:g} s"


def render_summary(
    rows: Sequence[Mapping[str, Any]],
    results: Mapping[str, MetricEvaluationResult],
    stats: Any,
    report: AgreementReport | None,
    elapsed_s: float,
    passes: int = 1,
) -> str:
    """The demo's closing table and totals (plain text), headed ``Results``; ``passes``: how often the
    questions ran (``--loop``), the table showing the last result of each."""
    out = [
        "",
        "Results: Contextual Utilization per question (score = used / relevant chunks; label: pass when "
        f"score >= {_threshold(results)})",
        "",
        _ROW.format("#", "id", "chunks", "relevant", "used", "score", "label", "labelled"),
    ]
    for i, row in enumerate(rows, start=1):
        result = results.get(row["query"])
        expected = row.get("expected_score")
        if result is None:
            out.append(_ROW.format(i, str(row.get("id", ""))[:22], "", "", "", "", "(not evaluated)", ""))
            continue
        s = result.signals
        labelled = _cell(expected if isinstance(expected, (int, float)) else None)
        out.append(
            _ROW.format(
                i,
                str(row.get("id", ""))[:22],
                s.total_chunks,
                s.total_relevant_chunks,
                s.utilized_chunks,
                _cell(result.score),
                result.label,
                labelled,
            )
        )
    scored = [r.score for r in results.values() if r.score is not None]
    passed = sum(1 for r in results.values() if r.passed)
    out.append("")
    runs = f"{len(rows)} × {passes} passes ({len(rows) * passes} runs)" if passes > 1 else f"{len(rows)}"
    out.append(f"questions run: {runs} in {elapsed_s:.2f} s; distinct questions evaluated: {len(results)}")
    if scored:
        out.append(f"mean utilization: {sum(scored) / len(scored):.3f} over {len(scored)} scored")
        out.append(
            f"pass rate: {passed / len(scored):.1%} (threshold {next(iter(results.values())).threshold:g})"
        )
    if report is not None:
        out.append(
            "agreement with the labels: "
            f"score MAE {_cell(report.mae, '.3f')}, RMSE {_cell(report.rmse, '.3f')}; "
            f"utilization F1 {_cell(report.utilization_f1, '.3f')}; "
            f"relevance F1 {_cell(report.relevance_f1, '.3f')}; "
            f"pooled utilization {_cell(report.pooled_predicted, '.3f')} "
            f"vs labelled {_cell(report.pooled_expected, '.3f')}"
        )
    dropped = sum(stats.dropped.values())
    failed = sum(stats.failed.values())
    out.append(
        f"evaluator: captured {stats.captured}, sampled out {stats.sampled_out}, "
        f"not selected {stats.not_selected}, evaluated {stats.evaluated}, "
        f"not applicable {stats.not_applicable}, dropped {dropped}{_detail(stats.dropped)}, "
        f"failed {failed}{_detail(stats.failed)}"
    )
    return "\n".join(out)


def _threshold(results: Mapping[str, MetricEvaluationResult]) -> str:
    return f"{next(iter(results.values())).threshold:g}" if results else "the threshold"


def _agreement(
    rows: Sequence[Mapping[str, Any]], results: Mapping[str, MetricEvaluationResult]
) -> AgreementReport | None:
    pairs = []
    for row in rows:
        result = results.get(row["query"])
        if result is None or "chunk_labels" not in row:
            continue
        try:
            pairs.append((LabelledRow.from_record(row), result))
        except ValueError:
            continue
    if not pairs:
        return None
    return agreement([p[0] for p in pairs], [p[1] for p in pairs])


def _evaluator(settings: Settings, telemetry: TelemetryHandle) -> tuple[_Collecting, Evaluator] | None:
    """The demo's collecting emitter and evaluator; ``None`` (after printing the error and shutting the
    telemetry down) when the judge cannot be built: no API key, a missing extra (named, never a secret)."""
    from ..worker._evaluator import Evaluator

    try:
        emitter = _Collecting(
            build_emitter(
                settings,
                tracer_provider=telemetry.tracer_provider,
                meter_provider=telemetry.meter_provider,
                logger_provider=telemetry.logger_provider,
            )
        )
        return emitter, Evaluator(emitter=emitter, settings=settings)
    except (ValueError, ImportError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        telemetry.shutdown(1_000)
        return None


def run(args: argparse.Namespace) -> int:
    from ..capture._langchain import UtilizationCallbackHandler
    from ..demo import build_rag_chain, replay_parts
    from ..emit._setup import configure_telemetry
    from ._demo_count import TelemetryCount
    from ._export_tally import ExportTally

    if args.limit < 0 or args.interval < 0:
        print("error: --limit and --interval must be >= 0", file=sys.stderr)
        return 2
    try:
        rows, bad_lines = _load_rows(args.data, args.limit)
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        settings = _settings(args)
    except SettingsError as exc:  # names the setting and its variable
        print(f"error: {exc}", file=sys.stderr)
        return 2
    # OTLP export requests time out with the shutdown deadline unless OTEL_EXPORTER_OTLP_*TIMEOUT says
    # otherwise, so an unreachable backend costs the exit at most that long (the SDK's default is 10 s per
    # signal, with retries).
    count, exports = TelemetryCount(), ExportTally()
    try:
        telemetry = configure_telemetry(
            console=args.show_telemetry,
            console_format="compact",
            otlp_timeout_s=max(1.0, settings.shutdown_timeout_s),
            span_processors=[count.span_processor],
            log_record_processors=[count.log_record_processor],
            wrap_exporter=exports.wrap,
        )
    except ValueError as exc:  # unsupported OTEL_* exporter/protocol values, named
        print(f"error: {exc}", file=sys.stderr)
        return 2
    export_budget_s = max(1.0, settings.shutdown_timeout_s, telemetry.otlp_timeout_s or 0.0)
    built = _evaluator(settings, telemetry)
    if built is None:
        return 2
    emitter, evaluator = built
    handler = UtilizationCallbackHandler(evaluator=evaluator)
    stop = _stop_on_signals() if args.loop else None  # before the banner: a signal from now on is handled
    retriever, model = replay_parts(rows)
    chain = build_rag_chain(retriever, model)
    destinations = _destinations(telemetry.destinations)
    print(
        f"ctxutil-otel demo: {len(rows)} questions through an LCEL RAG chain; judge "
        f"{evaluator.metric.judge.name}; telemetry -> {destinations or _NOT_EXPORTED}",
        file=sys.stderr,
    )
    unreachable = unreachable_otlp_endpoints(telemetry.destinations)
    for problem in unreachable:
        print(
            f"warning: cannot connect to the OTLP endpoint {problem}; telemetry may not be delivered "
            f"(the exit waits at most {export_budget_s:g} s for it)",
            file=sys.stderr,
        )
    started = time.perf_counter()
    questions = [r["query"] for r in rows]
    config: RunnableConfig = {"callbacks": [handler], "max_concurrency": 4}
    passes = 1
    if stop is not None:
        passes = _loop(lambda: chain.batch(questions, config=config), args.interval, stop)
    else:
        chain.batch(questions, config=config)
    # Stopped by a signal (docker stop, Ctrl-C): honour the shutdown deadline; else give a slow judge time.
    flush_ms = int(settings.shutdown_timeout_s * 1000) if stop is not None else 60_000
    flushed = evaluator.force_flush(flush_ms)
    elapsed = time.perf_counter() - started
    evaluator.shutdown(1_000)
    # One export per signal (the shutdown exports what is buffered and the last metric collection).
    exported = telemetry.shutdown(int(export_budget_s * 1000))
    stats = evaluator.stats()
    print(render_summary(rows, emitter.results, stats, _agreement(rows, emitter.results), elapsed, passes))
    print(_telemetry_line(destinations, count.describe(), exports, exported, export_budget_s, unreachable))
    if not flushed:
        print("warning: evaluations were still pending at the flush deadline", file=sys.stderr)
    return 0 if flushed and not stats.failed and not bad_lines else 1
