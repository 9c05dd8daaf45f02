"""Providers as arguments and "never a silent nowhere" (issue 9, items 1, 2, 3 and 9).

Real parts: the OpenTelemetry SDK providers with in-memory exporters and reader, OpenInference's real
``LangChainInstrumentor`` on a provider that is not the global one, the demo's real LCEL chain, the real
Evaluator, Emitter and offline judge. Process-wide state (the global providers, the warnings given once
per process) is tested in a subprocess.
"""

from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxutil_otel import ContextualUtilization, SettingsError
from ctxutil_otel.capture import Interaction, UtilizationCallbackHandler
from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.data import load_sample
from ctxutil_otel.demo import build_rag_chain, replay_parts
from ctxutil_otel.emit import Emitter, names
from ctxutil_otel.judges import ChunkVerdict, JudgeResult
from ctxutil_otel.worker import Evaluator

# openinference-instrumentation-langchain 0.1.80 calls BaseMessage.text() on langchain-core 1.x
pytestmark = pytest.mark.filterwarnings("ignore:Calling .text\\(\\) as a method is deprecated")

ROWS = load_sample(3)


@dataclass
class Providers:
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logger_provider: LoggerProvider
    spans: InMemorySpanExporter
    reader: InMemoryMetricReader
    logs: InMemoryLogRecordExporter

    def kwargs(self) -> dict[str, object]:
        return {
            "tracer_provider": self.tracer_provider,
            "meter_provider": self.meter_provider,
            "logger_provider": self.logger_provider,
        }

    def evaluation_spans(self) -> list[object]:
        return [s for s in self.spans.get_finished_spans() if s.name == names.SPAN_EVALUATION]

    def metric_names(self) -> set[str]:
        data = self.reader.get_metrics_data()
        return {
            m.name
            for rm in (data.resource_metrics if data else [])
            for sm in rm.scope_metrics
            for m in sm.metrics
        }


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.upper().startswith("CTXUTIL_") and key.upper() != "CTXUTIL_MAX_WORKER_CPU_FRACTION":
            monkeypatch.delenv(key)
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)


@pytest.fixture
def providers() -> Iterator[Providers]:
    spans, reader, logs = InMemorySpanExporter(), InMemoryMetricReader(), InMemoryLogRecordExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    made = Providers(
        tracer_provider, MeterProvider(metric_readers=[reader]), logger_provider, spans, reader, logs
    )
    yield made
    for provider in (tracer_provider, made.meter_provider, logger_provider):
        provider.shutdown()


@pytest.fixture
def openinference() -> Iterator[LangChainInstrumentor]:
    instrumentor = LangChainInstrumentor()
    yield instrumentor
    instrumentor.uninstrument()


def _chain() -> object:
    retriever, model = replay_parts(ROWS)
    return build_rag_chain(retriever, model)


def _warnings(caplog: pytest.LogCaptureFixture, marker: str) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and marker in r.getMessage()
    ]


# --- item 1: a span processor on a provider that is not the global one -----------------------------


def _run_instrumented(
    providers: Providers,
    openinference: LangChainInstrumentor,
    caplog: pytest.LogCaptureFixture,
    processor: UtilizationSpanProcessor,
) -> UtilizationSpanProcessor:
    """OpenInference on the (non-global) provider, ``processor`` added to it, the chain run per row."""
    openinference.instrument(tracer_provider=providers.tracer_provider)
    providers.tracer_provider.add_span_processor(processor)
    chain = _chain()
    with caplog.at_level(logging.WARNING):
        for row in ROWS:
            chain.invoke(row["query"])  # type: ignore[attr-defined]
        assert processor.force_flush(30000)
    return processor


def test_processor_on_another_provider_than_its_results_warns_once(
    providers: Providers, openinference: LangChainInstrumentor, caplog: pytest.LogCaptureFixture
) -> None:
    # The reported set-up: the processor built without providers sends results to the global ones,
    # which are not the provider OpenInference traces into. Before: evaluated=3 and not a word.
    processor = _run_instrumented(providers, openinference, caplog, UtilizationSpanProcessor())
    stats = processor.stats()
    assert stats.evaluated + stats.not_applicable == 3
    assert providers.evaluation_spans() == []  # the results did not reach the application's provider
    found = _warnings(caplog, "UtilizationSpanProcessor(tracer_provider=provider")
    assert len(found) == 1, found
    processor.shutdown(5000)


def test_processor_takes_the_providers_and_the_results_arrive_there(
    providers: Providers, openinference: LangChainInstrumentor, caplog: pytest.LogCaptureFixture
) -> None:
    processor = _run_instrumented(
        providers, openinference, caplog, UtilizationSpanProcessor(**providers.kwargs())
    )
    evaluations = providers.evaluation_spans()
    assert len(evaluations) == 3
    app_traces = {
        s.context.trace_id for s in providers.spans.get_finished_spans() if s.name != names.SPAN_EVALUATION
    }
    assert {s.context.trace_id for s in evaluations} <= app_traces  # type: ignore[attr-defined]
    events = [
        r
        for r in providers.logs.get_finished_logs()
        if r.log_record.event_name == names.EVENT_EVALUATION_RESULT
        and (r.log_record.attributes or {}).get(names.ATTR_EVALUATION_NAME) == "contextual_utilization"
    ]
    assert len(events) == 3  # (each with its contextual_relevancy event besides)
    assert names.METRIC_EVALUATION_DURATION in providers.metric_names()
    assert _warnings(caplog, "ctxutil-otel") == []
    processor.shutdown(5000)


# --- item 2: the callback handler takes the providers, and a mistake is reported once -------------


def test_callback_handler_takes_the_providers(providers: Providers) -> None:
    handler = UtilizationCallbackHandler(max_evaluations_per_second=0, **providers.kwargs())
    chain = _chain()
    for row in ROWS:
        chain.invoke(row["query"], config={"callbacks": [handler]})  # type: ignore[attr-defined]
    assert handler.force_flush(30000)
    assert len(providers.evaluation_spans()) == 3
    utilization = [
        r
        for r in providers.logs.get_finished_logs()
        if (r.log_record.attributes or {}).get(names.ATTR_EVALUATION_NAME) == "contextual_utilization"
    ]
    assert len(utilization) == 3
    assert names.METRIC_EVALUATION_SCORE in providers.metric_names() or handler.stats().not_applicable == 3
    handler.shutdown(5000)


def test_unknown_settings_print_the_valid_ones_once() -> None:
    with pytest.raises(SettingsError) as raised:
        UtilizationCallbackHandler(tracer_providr=1, meter_providr=2, logger_providr=3)
    message = str(raised.value)
    assert all(f"unknown setting '{n}_providr'" in message for n in ("tracer", "meter", "logger"))
    assert message.count("max_pending_runs") == 1  # the list of valid settings, once


def test_providers_and_an_explicit_evaluator_or_emitter_are_refused(providers: Providers) -> None:
    evaluator = Evaluator(emitter=Emitter(**providers.kwargs()))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tracer_provider"):
        UtilizationCallbackHandler(evaluator, tracer_provider=providers.tracer_provider)
    with pytest.raises(TypeError, match="give them to Emitter"):
        Evaluator(emitter=Emitter(), tracer_provider=providers.tracer_provider)
    evaluator.shutdown(1000)


# --- item 3: settings that shape emission apply on every construction path ------------------------


def _one_result(evaluator: Evaluator) -> None:
    trace_id = random.getrandbits(128) | 1
    assert evaluator.admit(trace_id).submit(
        Interaction(
            query="what is tea", answer="tea is a drink", documents=["tea is a drink"], trace_id=trace_id
        )
    )
    assert evaluator.force_flush(30000)


def test_an_explicit_emitter_and_disagreeing_settings_is_an_error_saying_which_wins(
    providers: Providers,
) -> None:
    # Before: accepted, ev.settings said capture on and "bot", the telemetry had neither.
    with pytest.raises(SettingsError) as raised:
        Evaluator(
            emitter=Emitter(tracer_provider=providers.tracer_provider),
            capture_content=True,
            application_name="bot",
        )
    message = str(raised.value)
    assert "capture_content=True disagrees with the emitter passed in (capture_content=False)" in message
    assert "application_name='bot'" in message and "the emitter wins" in message


def test_environment_settings_shape_an_emitter_built_without_them(
    providers: Providers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXUTIL_CAPTURE_CONTENT", "true")
    monkeypatch.setenv("CTXUTIL_APPLICATION_NAME", "bot")
    evaluator = Evaluator(emitter=Emitter(**providers.kwargs()), max_evaluations_per_second=0)  # type: ignore[arg-type]
    assert (evaluator.settings.capture_content, evaluator.settings.application_name) == (True, "bot")
    _one_result(evaluator)
    (span,) = providers.evaluation_spans()
    attributes = span.attributes  # type: ignore[attr-defined]
    assert attributes[names.ATTR_APPLICATION_NAME] == "bot"
    assert attributes[names.ATTR_QUERY] == "what is tea"
    evaluator.shutdown(5000)


def test_an_explicit_emitter_wins_over_the_environment_and_the_settings_say_so(
    providers: Providers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXUTIL_CAPTURE_CONTENT", "true")
    evaluator = Evaluator(emitter=Emitter(tracer_provider=providers.tracer_provider, capture_content=False))
    assert evaluator.settings.capture_content is False
    evaluator.shutdown(1000)


# --- item 9 and "never a silent nowhere" ----------------------------------------------------------


class CountingJudge:
    name = "counting"
    model: str | None = None

    def __init__(self) -> None:
        self.calls = 0

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        self.calls += 1
        return JudgeResult(
            verdicts=[ChunkVerdict(index=i, is_relevant=True, is_utilized=True) for i in range(len(chunks))]
        )


def test_sdk_disabled_evaluates_nothing_and_counts_why(
    providers: Providers, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: every evaluation ran (with the OpenAI judge: paid calls), results thrown away.
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    judge = CountingJudge()
    evaluator = Evaluator(
        ContextualUtilization(judge=judge), max_evaluations_per_second=0, **providers.kwargs()
    )  # type: ignore[arg-type]
    admission = evaluator.admit(random.getrandbits(128) | 1)
    assert not admission and admission.refused == "sdk_disabled"
    assert evaluator.force_flush(1000)
    stats = evaluator.stats()
    assert (stats.captured, dict(stats.dropped), judge.calls) == (1, {"sdk_disabled": 1}, 0)
    assert evaluator.shutdown(1000)


_NOWHERE_APP = """
import logging, random, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
from ctxutil_otel.capture import Interaction
from ctxutil_otel.worker import Evaluator
ev = Evaluator(max_evaluations_per_second=0, max_worker_cpu_fraction=0)
for _ in range(3):
    t = random.getrandbits(128) | 1
    ev.admit(t).submit(Interaction(query="q", answer="a", documents=["a"], trace_id=t))
assert ev.force_flush(30000)
print(ev.stats().evaluated + ev.stats().not_applicable)
ev.shutdown(5000)
"""


def _run_app(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CTXUTIL_"))}
    return subprocess.run(
        [sys.executable, "-c", _NOWHERE_APP],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
    )


def test_results_going_to_no_op_providers_are_warned_once_with_the_fix() -> None:
    done = _run_app()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3"
    assert done.stderr.count("go nowhere") == 1, done.stderr
    assert "tracer_provider=" in done.stderr and "configure_telemetry" in done.stderr


def test_sdk_disabled_is_warned_once() -> None:
    done = _run_app(OTEL_SDK_DISABLED="true")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0"
    assert done.stderr.count("OTEL_SDK_DISABLED=true") == 1, done.stderr


# --- issue 23 item 5: the README's quick starts deliver to the user's providers ------------------------


def _readme_block(anchor: str) -> str:
    """The first ``python`` code block after ``<a id="anchor">`` in the README."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    after = text[text.index(f'<a id="{anchor}"></a>') :]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readmes_span_processor_line_on_a_non_global_provider_delivers_without_warning(
    providers: Providers, openinference: LangChainInstrumentor, caplog: pytest.LogCaptureFixture
) -> None:
    # The README's line was ``provider.add_span_processor(UtilizationSpanProcessor())``: on OpenInference's
    # own pattern (instrument(tracer_provider=tp), tp not global) two warnings, and nothing arrived.
    openinference.instrument(tracer_provider=providers.tracer_provider)
    namespace = {
        "tp": providers.tracer_provider,
        "mp": providers.meter_provider,
        "lp": providers.logger_provider,
    }
    exec(_readme_block("span-processor"), namespace)  # the README's own code, as a user pastes it
    chain = _chain()
    with caplog.at_level(logging.WARNING):
        for row in ROWS:
            chain.invoke(row["query"])  # type: ignore[attr-defined]
        # The provider's force_flush reaches every processor on it, ours included (the README's line
        # keeps no reference to it); the fixture's shutdown stops it.
        assert providers.tracer_provider.force_flush(30000)
    assert len(providers.evaluation_spans()) == 3
    assert _warnings(caplog, "ctxutil") == []


def test_the_readmes_callback_quick_start_delivers_to_the_users_providers(
    providers: Providers, caplog: pytest.LogCaptureFixture
) -> None:
    rows = iter(ROWS)
    namespace = {
        "tp": providers.tracer_provider,
        "mp": providers.meter_provider,
        "lp": providers.logger_provider,
        "chain": _chain_taking_a_question(),
        "q": next(rows)["query"],
    }
    with caplog.at_level(logging.WARNING):
        exec(_readme_block("langchain-callback"), namespace)  # the README's own code
        handler = namespace["handler"]
        assert isinstance(handler, UtilizationCallbackHandler)
        assert handler.force_flush(30000)
    assert len(providers.evaluation_spans()) == 1
    assert _warnings(caplog, "ctxutil") == []
    handler.shutdown(5000)


def _chain_taking_a_question() -> object:
    """The demo's chain behind ``{"question": q}``, the input the README's snippet passes."""
    from langchain_core.runnables import RunnableLambda

    return RunnableLambda(lambda inputs: inputs["question"]) | _chain()  # type: ignore[operator]
