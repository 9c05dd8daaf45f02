"""Fault injection (issue 24): what comes from outside — a judge server's numbers and words, a key with a
stray newline, a batch file's lines, a model file, the application's environment and its texts — is
checked where it enters, so it never harms the application's telemetry, leaks the key, or stops the rest.

Real parts: the ``openai`` client over HTTP against the local OpenAI-compatible server of ``tests/support``,
the real :class:`~ctxutil_otel.worker.Evaluator` and :class:`~ctxutil_otel.emit.Emitter` on OpenTelemetry
SDK providers exporting over OTLP/gRPC to the local receiver of ``tests/support`` (rows 1 and 6), a real
spawned process worker child (the environment), and the ``ctxutil-otel`` command line (row 8).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from ctxutil_otel import Settings, SettingsError
from ctxutil_otel.capture import Interaction
from ctxutil_otel.judges import (
    ChunkVerdict,
    JudgeError,
    JudgeResult,
    LexicalJudge,
    ModelFileError,
    OpenAIJudge,
    load_model,
)
from ctxutil_otel.metric import ContextualUtilization
from ctxutil_otel.worker import Evaluator
from tests.support.accounting import assert_accounted
from tests.support.doubles import RecordingEmitter
from tests.support.openai_server import (
    OpenAICompatServer,
    RecordedRequest,
    Reply,
    completion,
    parse_judge_prompt,
    verdict_handler,
)
from tests.support.otlp_receiver import OTLPReceiver, attributes_of

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-issue24-Zq8rT5vW2xY7bN4mK9pL3"
WAIT_S = 60.0


def _interaction(n: int, documents: Sequence[object] | None = None) -> Interaction:
    return Interaction(
        query=f"what is python {n}",
        answer="Python is a high-level programming language created by Guido van Rossum.",
        documents=documents
        or ["Python is a high-level programming language.", "Guido van Rossum created Python."],
        trace_id=0x24000 + n,
    )


class _Telemetry:
    """An application's providers exporting over OTLP/gRPC to ``receiver``, with its own counter."""

    def __init__(self, receiver: OTLPReceiver) -> None:
        endpoint = receiver.grpc_endpoint
        self.tracer_provider = TracerProvider(shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True))
        )
        self.reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=endpoint, insecure=True), export_interval_millis=60_000
        )
        self.meter_provider = MeterProvider(metric_readers=[self.reader], shutdown_on_exit=False)
        self.logger_provider = LoggerProvider(shutdown_on_exit=False)
        self.logger_provider.add_log_record_processor(
            SimpleLogRecordProcessor(OTLPLogExporter(endpoint=endpoint, insecure=True))
        )
        self.app_requests = self.meter_provider.get_meter("the-application").create_counter("app.requests")

    def providers(self) -> dict[str, Any]:
        return {
            "tracer_provider": self.tracer_provider,
            "meter_provider": self.meter_provider,
            "logger_provider": self.logger_provider,
        }

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()
        self.logger_provider.shutdown()


@pytest.fixture
def receiver() -> Iterator[OTLPReceiver]:
    with OTLPReceiver() as running:
        yield running


@pytest.fixture
def telemetry(receiver: OTLPReceiver) -> Iterator[_Telemetry]:
    made = _Telemetry(receiver)
    yield made
    made.shutdown()


def _poisoning(prompt_tokens: int) -> Any:
    """Valid verdicts, but the first two replies report ``prompt_tokens`` (a buggy server's value)."""
    valid = verdict_handler()
    calls = [0]

    def handler(request: RecordedRequest) -> Reply:
        calls[0] += 1
        reply = valid(request)
        if calls[0] <= 2:
            body = dict(reply.body)
            body["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": 5, "total_tokens": 0}
            return Reply(body=body)
        return reply

    return handler


def _sum(receiver: OTLPReceiver, name: str) -> list[int]:
    return [int(p.as_int) for m in receiver.metrics(name) for p in m.sum.data_points]


# --- row 1: a judge server's numbers -----------------------------------------------------------------


@pytest.mark.parametrize("prompt_tokens", [2**64 - 1, -1], ids=["2**64-1", "negative"])
def test_a_reply_s_impossible_token_count_is_a_judge_error_never_a_poisoned_instrument_or_budget(
    telemetry: _Telemetry, receiver: OTLPReceiver, prompt_tokens: int
) -> None:
    with OpenAICompatServer(_poisoning(prompt_tokens)) as server:
        evaluator = Evaluator(
            judge="openai",
            judge_model="judge-model",
            judge_base_url=server.base_url,
            judge_api_key=KEY,
            judge_token_budget_per_minute=100_000,
            max_evaluations_per_second=0,
            worker="thread",
            **telemetry.providers(),
        )
        try:
            for n in range(5):
                item = _interaction(n)
                assert evaluator.admit(item.trace_id).submit(item)
                assert evaluator.force_flush(
                    WAIT_S * 1000
                )  # one at a time: the first two are the bad replies
            stats = evaluator.stats()
            budget = evaluator._engine._chain.budget
            assert budget is not None
            level = budget.level()
        finally:
            evaluator.shutdown(5000)
    # Both bad replies are counted judge errors; the budget stays usable, so the rest are evaluated.
    assert stats.failed == {"malformed_response": 2}
    assert stats.evaluated + stats.not_applicable == 3 and not stats.dropped, stats
    assert level > 0
    assert_accounted(evaluator.stats())
    # The application's own metric still reaches the collector, next to ours, every export.
    for round_ in range(2):
        telemetry.app_requests.add(1, {"route": "/ask"})
        assert telemetry.meter_provider.force_flush(10_000)
        assert receiver.wait_for(lambda r, seen=round_: len(r.metrics("app.requests")) > seen)
    assert _sum(receiver, "app.requests")[-1] == 2
    tokens = _sum(receiver, "ctxutil.judge.tokens")
    assert tokens and all(0 <= value < 2**40 for value in tokens)


def test_chunk_metadata_beyond_64_bits_is_left_out_before_the_exporter_sees_it(
    telemetry: _Telemetry, receiver: OTLPReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    # A document's metadata (from a retriever, or a sender's JSON attribute) holding 2**64 reached the
    # exporter as an int attribute: OTLP encodes int64, and the exporter logged an exception on every export
    # ("Failed to encode key") before dropping it. It is left out at the emission boundary now.
    evaluator = Evaluator(
        judge="lexical",
        chunk_metadata_keys=("page", "source"),
        max_evaluations_per_second=0,
        worker="thread",
        **telemetry.providers(),
    )
    documents = [
        Document(page_content="Python is a high-level programming language.", metadata={"page": 2**64}),
        Document(page_content="Guido van Rossum created Python.", metadata={"page": 3, "source": "wiki"}),
    ]
    try:
        item = _interaction(0, documents)
        assert evaluator.admit(item.trace_id).submit(item)
        assert evaluator.force_flush(WAIT_S * 1000)
    finally:
        evaluator.shutdown(5000)
    with telemetry.tracer_provider.get_tracer("the-application").start_as_current_span("app.request"):
        pass
    assert receiver.wait_for(
        lambda r: bool(r.spans("app.request")) and bool(r.spans("contextual_utilization"))
    )
    [span] = receiver.spans("contextual_utilization")
    attributes = attributes_of(span)
    assert "ctxutil.chunks.0.metadata.page" not in attributes  # left out, not exported
    assert attributes["ctxutil.chunks.1.metadata.page"] == 3
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "encode" in r.getMessage()]


def test_a_lone_surrogate_in_captured_content_is_exported_replaced_never_dropped_by_the_encoder(
    telemetry: _Telemetry, receiver: OTLPReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    # Python strings may hold lone surrogates (json.loads of "\ud800", os.fsdecode's surrogateescape). With
    # content capture on, the query and chunk texts reached the OTLP encoder as they were: it logged an
    # ERROR traceback ("Failed to encode key ctxutil.query") for each such attribute on every export and
    # left the attribute out. Like 64-bit overflows, they are made encodable at the emission boundary.
    evaluator = Evaluator(
        judge="lexical",
        capture_content=True,
        chunk_metadata_keys=("source",),
        max_evaluations_per_second=0,
        worker="thread",
        **telemetry.providers(),
    )
    documents = [
        Document(
            page_content="Python is a high-level programming language.\ud800", metadata={"source": "w\udcff"}
        ),
        Document(page_content="Guido van Rossum created Python."),
    ]
    try:
        item = dataclasses.replace(_interaction(0, documents), query="what is python 0\udcff")
        assert evaluator.admit(item.trace_id).submit(item)
        assert evaluator.force_flush(WAIT_S * 1000)
    finally:
        evaluator.shutdown(5000)
    assert receiver.wait_for(lambda r: bool(r.spans("contextual_utilization")))
    [span] = receiver.spans("contextual_utilization")
    attributes = attributes_of(span)
    assert attributes["ctxutil.query"] == "what is python 0\ufffd"
    assert attributes["ctxutil.chunks.0.text"] == "Python is a high-level programming language.\ufffd"
    assert attributes["ctxutil.chunks.0.metadata.source"] == "w\ufffd"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "encode" in r.getMessage()]


# --- row 6: one redaction for everything exported ----------------------------------------------------


def _echoing_key(reason: str) -> Any:
    def handler(request: RecordedRequest) -> Reply:
        prompt = parse_judge_prompt(request.body)
        verdicts = [
            {"index": i, "is_relevant": True, "is_utilized": True, "reason": reason}
            for i in range(len(prompt.chunks))
        ]
        return Reply(
            body=completion(json.dumps({"verdicts": verdicts}), prompt_tokens=10, completion_tokens=10)
        )

    return handler


@pytest.mark.parametrize("worker", ["thread", "process"])
def test_a_reason_echoing_the_key_is_exported_redacted(
    telemetry: _Telemetry, receiver: OTLPReceiver, worker: str
) -> None:
    # The model echoes the key (a prompt injection in a chunk can ask for it): the reasons, exported under
    # content capture, carried it verbatim; only error paths redacted it.
    reason = f"the key is {KEY} (or {KEY[:12]}..., {KEY.upper()})"
    with OpenAICompatServer(_echoing_key(reason)) as server:
        evaluator = Evaluator(
            judge="openai",
            judge_model="judge-model",
            judge_base_url=server.base_url,
            judge_api_key=KEY,
            capture_content=True,
            max_evaluations_per_second=0,
            worker=worker,
            **telemetry.providers(),
        )
        try:
            item = _interaction(0)
            assert evaluator.admit(item.trace_id).submit(item)
            assert evaluator.force_flush(WAIT_S * 1000)
            assert evaluator.stats().evaluated == 1
        finally:
            evaluator.shutdown(5000)
    assert receiver.wait_for(lambda r: bool(r.spans("contextual_utilization")) and bool(r.log_records()))
    [span] = receiver.spans("contextual_utilization")
    attributes = attributes_of(span)
    assert attributes["ctxutil.chunks.0.reason"].startswith("the key is [REDACTED]")
    exported = json.dumps([attributes, *(attributes_of(r) for r in receiver.log_records())], default=str)
    assert KEY[:8].lower() not in exported.lower() and KEY[-8:].lower() not in exported.lower()


# --- row 7: a key with surrounding whitespace; the HTTP stack's DEBUG logs ---------------------------


@pytest.mark.parametrize(
    "padded",
    [f"{KEY}\n", f" {KEY}", f"{KEY} ", f"{KEY[:10]}\n{KEY[10:]}"],
    ids=["newline", "leading", "trailing", "inside"],
)
def test_a_key_with_surrounding_whitespace_is_refused_at_settings_time_never_shown(
    padded: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(SettingsError) as given:
        Settings(judge_api_key=padded)
    monkeypatch.setenv("CTXUTIL_JUDGE_API_KEY", padded)
    with pytest.raises(SettingsError) as from_env:
        Settings()
    for info in (given, from_env):
        message = str(info.value)
        assert "judge_api_key" in message and "whitespace" in message
        assert KEY[:8] not in message and KEY[-8:] not in message
    assert "CTXUTIL_JUDGE_API_KEY" in str(from_env.value)
    # The judge built directly, or from OPENAI_API_KEY, refuses it as well (ValueError naming the source).
    with pytest.raises(ValueError, match="api_key") as direct:
        OpenAIJudge(api_key=padded, base_url="http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", padded)
    with pytest.raises(ValueError, match="OPENAI_API_KEY") as env:
        OpenAIJudge(base_url="http://127.0.0.1:9/v1")
    for info in (direct, env):
        assert KEY[:8] not in str(info.value)


def test_the_http_stack_s_debug_logs_never_hold_the_key(caplog: pytest.LogCaptureFixture) -> None:
    # Every logger of the openai SDK and its HTTP client at DEBUG. A proxy that reflects the Authorization
    # header in a response header (and in an error body) had the key written by the HTTP client's DEBUG
    # line of the response headers, once per attempt (a retried 500, then a 200).
    valid = verdict_handler()
    calls = [0]

    def reflecting(request: RecordedRequest) -> Reply:
        calls[0] += 1
        header = request.headers.get("authorization", "")
        echo = {"X-Echo-Authorization": header, "X-Request-Id": header}
        if calls[0] == 1:
            return Reply(status=500, body={"error": {"message": f"bad {header}", "type": "x"}}, headers=echo)
        return Reply(body=valid(request).body, headers=echo)

    caplog.set_level(logging.DEBUG)
    with OpenAICompatServer(reflecting) as server:
        judge = OpenAIJudge(api_key=KEY, base_url=server.base_url, max_retries=1, max_retry_after_s=1.0)

        async def run() -> JudgeResult:
            try:
                return await judge.judge("what is python", "Python is a language.", ["Python is a language."])
            finally:
                await judge.aclose()

        result = asyncio.run(run())
        assert len(server.requests) == 2 and len(result.verdicts) == 1
    assert any(r.name.startswith(("httpx", "httpcore", "openai")) for r in caplog.records)
    assert any("[REDACTED]" in r.getMessage() for r in caplog.records)  # the lines are kept, the key cut
    logged = caplog.text + "".join(r.getMessage() for r in caplog.records)
    assert KEY[:8] not in logged and KEY[-8:] not in logged


# --- row 8: batch lines the JSON reader cannot take ------------------------------------------------


@pytest.mark.parametrize("command", ["evaluate", "bench"])
def test_a_line_with_a_huge_integer_is_a_bad_line_and_a_bom_is_accepted(tmp_path: Path, command: str) -> None:
    row = {
        "query": "what is python",
        "answer": "Python is a programming language.",
        "contexts": ["Python is a programming language.", "Ice cream is cold."],
        "chunk_labels": [{"relevant": True, "utilized": True}, {"relevant": False, "utilized": False}],
    }
    huge = json.dumps(row)[:-1] + ', "n": ' + "9" * 5000 + "}"
    dataset = tmp_path / "rows.jsonl"
    dataset.write_bytes(
        b"\xef\xbb\xbf" + (json.dumps(row) + "\n" + huge + "\n" + json.dumps(row) + "\n").encode("utf-8")
    )
    out = tmp_path / "out.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "ctxutil_otel", command, str(dataset), "--judge", "lexical", "--out", str(out)]
        if command == "evaluate"
        else [sys.executable, "-m", "ctxutil_otel", command, str(dataset), "--judge", "lexical", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert f"{dataset}:2: " in done.stderr and "4,300 digits" in done.stderr, done.stderr
    assert f"{dataset}:1:" not in done.stderr and f"{dataset}:3:" not in done.stderr, done.stderr
    if command == "evaluate":
        written = out.read_text(encoding="utf-8").splitlines()
        assert len(written) == 2  # both good lines, the BOM line included
    else:
        report = json.loads(done.stdout)
        assert (report["n"], report["bad_lines"]) == (2, 1)
    assert done.returncode == 1  # the documented status when a line was bad (not 2: the run went on)


# --- also seen: the child's environment, model file size, text size, SettingsError size, error.type -----


class _EnvironmentJudge:
    """Fails when the process it runs in has either key variable in its environment (``os.environ``)."""

    name = "environment"
    model: str | None = None

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        inherited = [name for name in ("CTXUTIL_JUDGE_API_KEY", "OPENAI_API_KEY") if name in os.environ]
        if inherited:
            raise JudgeError(f"inherited {inherited}")
        return JudgeResult(
            verdicts=[ChunkVerdict(index=i, is_relevant=True, is_utilized=True) for i in range(len(chunks))]
        )


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_process_worker_child_s_environment_holds_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("CTXUTIL_JUDGE_API_KEY", KEY + "x")
    # A judge of the application's own, run in the child: it sees no key variable.
    evaluator = Evaluator(
        ContextualUtilization(judge=_EnvironmentJudge()),
        max_evaluations_per_second=0,
        worker="process",
        emitter=RecordingEmitter(),
    )
    try:
        item = _interaction(0)
        assert evaluator.admit(item.trace_id).submit(item)
        assert evaluator.force_flush(WAIT_S * 1000)
        assert evaluator.stats().evaluated == 1, evaluator.stats()
        pid = evaluator._engine._judging.pid  # type: ignore[attr-defined]  # the process judging's child
        assert pid is not None
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert KEY.encode() not in environ  # not even in the initial environment block
    finally:
        evaluator.shutdown(5000)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
def test_the_openai_judge_in_the_child_gets_the_key_of_openai_api_key_through_the_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with OpenAICompatServer() as server:
        evaluator = Evaluator(
            judge="openai",
            judge_model="judge-model",
            judge_base_url=server.base_url,
            max_evaluations_per_second=0,
            worker="process",
            emitter=RecordingEmitter(),
        )
        try:
            item = _interaction(0)
            assert evaluator.admit(item.trace_id).submit(item)
            assert evaluator.force_flush(WAIT_S * 1000)
            assert evaluator.stats().evaluated == 1, evaluator.stats()
            assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
            pid = evaluator._engine._judging.pid  # type: ignore[attr-defined]
            assert pid is not None and KEY.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
        finally:
            evaluator.shutdown(5000)


def _model_with(trees: list[list[list[float]]]) -> dict[str, Any]:
    document = json.loads((ROOT / "src/ctxutil_otel/data/learned_judge.json").read_text(encoding="utf-8"))
    document["relevance"]["trees"] = trees
    return document


def test_a_model_file_too_large_to_compile_is_refused_before_compiling_naming_the_field() -> None:
    def chain(depth: int) -> list[list[float]]:  # one split per level, a leaf on the left of each
        nodes: list[list[float]] = []
        for k in range(depth):
            nodes += [[0, 0.5, 2 * k + 1, 2 * k + 2], [0.1]]
        return [*nodes, [0.2]]

    started = time.process_time()
    with pytest.raises(ModelFileError, match=r"^relevance\.trees: \d+ nodes in all, more than the 20000"):
        load_model(_model_with([chain(64)] * 1000))  # 129,000 nodes: 3.8 s and +1.1 GB when compiled
    with pytest.raises(ModelFileError, match=r"^relevance\.trees\[0\]: deeper than 32 levels"):
        load_model(_model_with([chain(40)]))
    assert time.process_time() - started < 5.0  # refused, not compiled (compiling took seconds)


def test_a_settings_error_quotes_only_a_short_prefix_of_the_value() -> None:
    for value in ("x" * 20_000_000, ["y" * 10_000_000]):
        with pytest.raises(SettingsError) as info:
            Settings(selection_rules=value)
        assert len(str(info.value)) < 2_000 and "selection_rules" in str(info.value)
    with pytest.raises(SettingsError) as info:
        Settings(sample_rate="z" * 1_000_000)
    assert len(str(info.value)) < 1_000 and "sample_rate" in str(info.value)


class _UnicodeBrokenJudge:
    name = "broken"
    model: str | None = None

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        "\ud800".encode()  # raises UnicodeEncodeError, a class name outside the vocabulary
        raise AssertionError("unreachable")


def test_error_type_stays_in_the_vocabulary(telemetry: _Telemetry, receiver: OTLPReceiver) -> None:
    evaluator = Evaluator(
        ContextualUtilization(judge=_UnicodeBrokenJudge()),
        max_evaluations_per_second=0,
        worker="thread",
        **telemetry.providers(),
    )
    try:
        item = _interaction(0)
        assert evaluator.admit(item.trace_id).submit(item)
        assert evaluator.force_flush(WAIT_S * 1000)
        assert evaluator.stats().failed == {"_OTHER": 1}
    finally:
        evaluator.shutdown(5000)
    assert receiver.wait_for(lambda r: bool(r.spans("contextual_utilization")))
    [span] = receiver.spans("contextual_utilization")
    assert attributes_of(span)["error.type"] == "_OTHER"


@pytest.mark.parametrize("worker", ["process", "thread"])
def test_a_huge_text_is_cut_before_it_is_judged_and_the_cut_is_in_the_reasons(worker: str) -> None:
    # The process worker cuts before pickling. The thread worker cuts too: the metric's whitespace
    # normalisation of a 64 MB chunk (one str.split) held the GIL for 1.4 s, stalling the application's
    # threads (reviewed: 1.8 s longest stall of a 1 ms ticker, against 9 ms with the process worker).
    emitter = RecordingEmitter()
    evaluator = Evaluator(
        ContextualUtilization(judge=LexicalJudge()),
        max_evaluations_per_second=0,
        max_worker_cpu_fraction=0,
        worker=worker,
        emitter=emitter,
    )
    big = "Python is a high-level programming language. " * 400_000  # 18 MB
    try:
        item = _interaction(0, [big, "Guido van Rossum created Python."])
        assert evaluator.admit(item.trace_id).submit(item)
        assert evaluator.force_flush(WAIT_S * 1000)
        assert evaluator.stats().evaluated == 1, evaluator.stats()
    finally:
        evaluator.shutdown(5000)
    (_, result, _) = emitter.emitted[0]
    reasons = [v.reason for v in result.signals.verdicts]
    assert reasons and all("the first 100000 characters of the chunk 0" in r for r in reasons), reasons
