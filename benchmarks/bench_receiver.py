"""Receiver throughput and memory of ``ctxutil-otel serve`` under sustained OTLP load (issue 4: at least
5,000 spans/s on one core with evaluation at sample rate 0.01, memory bounded over 60 s).

    .venv/bin/python benchmarks/bench_receiver.py [--duration 60] [--transport http|grpc] [--senders 4]
        [--batch-traces 64] [--sample-rate 0.01] [--warmup 5] [--serve-cpu 0]

Set-up:

* ``serve``: the real CLI (``python -m ctxutil_otel serve``) in a subprocess pinned to ONE core
  (``--serve-cpu``, via ``sched_setaffinity`` before exec, so every thread of it shares that core), with
  ``CTXUTIL_SAMPLE_RATE`` = ``--sample-rate``, the offline lexical judge, no rate cap
  (``CTXUTIL_MAX_EVALUATIONS_PER_SECOND=0``: every sampled turn is evaluated on the same core), and its
  own results exported nowhere (``OTEL_*_EXPORTER=none``: the evaluation span, log record and metrics
  are still built and recorded by the SDK, then dropped).
* Sender: this process, pinned to the other cores, ``--senders`` threads each on its own keep-alive
  connection (HTTP) or sharing one channel (gRPC), posting ``ExportTraceServiceRequest`` batches of
  ``--batch-traces`` traces (8 spans each, 512 spans by default: the SDK ``BatchSpanProcessor``'s
  batch) as fast as the receiver answers. Every batch gets fresh trace ids, so the sampler sees new
  traces and the assembly buffer works as in production.
* A trace is a recorded OpenInference RAG turn (real SDK tracer, encoded by the SDK's OTLP encoder):
  CHAIN root; RETRIEVER with 4 documents of ~400 characters (id, score, content); EMBEDDING; prompt
  template CHAIN; LLM with system/user/assistant messages and token counts; output parser; plus an HTTP
  client span and a database span (non-RAG spans): ~1 KB of attributes per span on average.

Figures (after ``--warmup`` seconds, over ``--duration`` seconds): spans/s accepted (answered 200),
requests refused by back-pressure (503 / UNAVAILABLE), the receiver's CPU use in cores
(``/proc/<pid>/stat``), and its RSS (``/proc/<pid>/status`` ``VmRSS``) sampled every second: at the start
of the measurement, at the middle, at the end and the maximum. Memory is bounded when the second half
adds nothing systematic. The receiver's own summary (spans accepted, evaluator outcomes) is printed at
the end, after a graceful SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.util.types import AttributeValue

EXPORT_PATH = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
_WORDS = (
    "green tea antioxidants catechins inflammation metabolism study participants reported lower "
    "cholesterol levels after twelve weeks regular consumption moderate caffeine content research"
).split()


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(_WORDS))
    return " ".join(words)


def record_trace(rng: random.Random) -> list[Any]:
    """One RAG trace (8 spans) recorded by a real SDK tracer."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "rag-app", "service.version": "1.4.2"})
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("openinference.instrumentation.langchain", "0.1.28")
    query = _text(rng, 60) + "?"
    answer = _text(rng, 300)
    chunks = [_text(rng, 400) for _ in range(4)]
    documents: dict[str, str | float] = {}
    for i, chunk in enumerate(chunks):
        documents[f"retrieval.documents.{i}.document.id"] = f"kb-{rng.randrange(10**6)}"
        documents[f"retrieval.documents.{i}.document.score"] = round(rng.random(), 4)
        documents[f"retrieval.documents.{i}.document.content"] = chunk
    chain = {"openinference.span.kind": "CHAIN", "input.value": query, "output.value": answer}
    with tracer.start_as_current_span("RetrievalQA", attributes=chain):
        with tracer.start_as_current_span(
            "VectorStoreRetriever",
            attributes={"openinference.span.kind": "RETRIEVER", "input.value": query, **documents},
        ):
            with tracer.start_as_current_span(
                "OpenAIEmbeddings",
                attributes={
                    "openinference.span.kind": "EMBEDDING",
                    "embedding.model_name": "text-embedding-3-small",
                },
            ):
                pass
            with tracer.start_as_current_span(
                "SELECT chunks",
                kind=SpanKind.CLIENT,
                attributes={
                    "db.system": "postgresql",
                    "db.operation.name": "SELECT",
                    "db.collection.name": "chunks",
                },
            ):
                pass
        with tracer.start_as_current_span(
            "ChatPromptTemplate", attributes={"openinference.span.kind": "CHAIN", "input.value": query}
        ):
            pass
        llm: dict[str, AttributeValue] = {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "Answer from the context:\n" + "\n".join(chunks),
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": query,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
            "llm.token_count.prompt": 512,
            "llm.token_count.completion": 96,
        }
        http: dict[str, AttributeValue] = {
            "http.request.method": "POST",
            "url.full": "https://api.openai.com/v1/chat/completions",
            "server.address": "api.openai.com",
            "http.response.status_code": 200,
        }
        with (
            tracer.start_as_current_span("ChatOpenAI", kind=SpanKind.CLIENT, attributes=llm),
            tracer.start_as_current_span("POST /v1/chat/completions", kind=SpanKind.CLIENT, attributes=http),
        ):
            pass
        with tracer.start_as_current_span("StrOutputParser", attributes={"openinference.span.kind": "CHAIN"}):
            pass
    provider.shutdown()
    return list(memory.get_finished_spans())


class Batch:
    """A template request of ``traces`` traces; :meth:`payload` re-stamps fresh trace ids each time."""

    def __init__(self, traces: int, seed: int) -> None:
        rng = random.Random(seed)
        spans = [span for _ in range(traces) for span in record_trace(rng)]
        self.request: ExportTraceServiceRequest = encode_spans(spans)
        self.spans = [s for rs in self.request.resource_spans for ss in rs.scope_spans for s in ss.spans]
        originals = sorted({s.trace_id for s in self.spans})
        self._slot = {tid: i for i, tid in enumerate(originals)}
        self._slots = [self._slot[s.trace_id] for s in self.spans]
        self.traces = len(originals)
        self.rng = random.Random(seed + 1)

    def payload(self) -> bytes:
        ids = [self.rng.getrandbits(128).to_bytes(16, "big") for _ in range(self.traces)]
        for span, slot in zip(self.spans, self._slots, strict=True):
            span.trace_id = ids[slot]
        return bytes(self.request.SerializeToString())


@dataclass
class Counters:
    lock: threading.Lock = field(default_factory=threading.Lock)
    spans: int = 0
    requests: int = 0
    refused: int = 0
    errors: int = 0
    measuring: bool = False

    def add(self, spans: int, ok: bool, refused: bool) -> None:
        with self.lock:
            if not self.measuring:
                return
            self.requests += 1
            if ok:
                self.spans += spans
            elif refused:
                self.refused += 1
            else:
                self.errors += 1


def _http_sender(port: int, batch: Batch, counters: Counters, stop: threading.Event) -> None:
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    spans = len(batch.spans)
    while not stop.is_set():
        body = batch.payload()
        try:
            connection.request(
                "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
            )
            response = connection.getresponse()
            response.read()
        except (OSError, http.client.HTTPException):
            counters.add(spans, False, False)
            connection.close()
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            continue
        counters.add(spans, response.status == 200, response.status == 503)
        if response.status == 503:
            time.sleep(float(response.getheader("Retry-After") or 1))
    connection.close()


def _grpc_sender(channel: Any, batch: Batch, counters: Counters, stop: threading.Event) -> None:
    import grpc  # type: ignore[import-untyped,unused-ignore]

    call = channel.unary_unary(EXPORT_PATH, request_serializer=None, response_deserializer=None)
    spans = len(batch.spans)
    while not stop.is_set():
        try:
            call(batch.payload(), timeout=30)
        except grpc.RpcError as exc:
            unavailable = exc.code() is grpc.StatusCode.UNAVAILABLE
            counters.add(spans, False, unavailable)
            if unavailable:
                time.sleep(1.0)
            continue
        counters.add(spans, True, False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _start_serve(args: argparse.Namespace, grpc_port: int, http_port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXUTIL_", "OTEL_"))}
    env.update(
        {
            "CTXUTIL_SAMPLE_RATE": str(args.sample_rate),
            "CTXUTIL_MAX_EVALUATIONS_PER_SECOND": "0",
            "CTXUTIL_JUDGE": "lexical",
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
        }
    )
    cpu = args.serve_cpu
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxutil_otel",
            "serve",
            "--grpc-port",
            str(grpc_port),
            "--http-port",
            str(http_port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    if "listening" not in line:
        process.kill()
        raise SystemExit(f"serve did not start: {line}{process.stderr.read()}")
    return process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="measured seconds (default 60)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before measuring (default 5)")
    parser.add_argument("--transport", choices=("http", "grpc"), default="http")
    parser.add_argument("--senders", type=int, default=4, help="concurrent requests (default 4)")
    parser.add_argument("--batch-traces", type=int, default=64, help="traces per request, 8 spans each")
    parser.add_argument("--sample-rate", type=float, default=0.01)
    parser.add_argument("--serve-cpu", type=int, default=0, help="the core serve is pinned to (default 0)")
    args = parser.parse_args(argv)

    cores = os.sched_getaffinity(0)
    others = cores - {args.serve_cpu} or cores
    os.sched_setaffinity(0, others)
    batches = [Batch(args.batch_traces, seed=i) for i in range(args.senders)]
    grpc_port, http_port = _free_port(), _free_port()
    serve = _start_serve(args, grpc_port, http_port)
    counters, stop = Counters(), threading.Event()
    channel = None
    if args.transport == "grpc":
        import grpc  # type: ignore[import-untyped,unused-ignore]

        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
    threads = []
    for batch in batches:
        target: Any = _grpc_sender if channel is not None else _http_sender
        endpoint = channel if channel is not None else http_port
        threads.append(threading.Thread(target=target, args=(endpoint, batch, counters, stop), daemon=True))
    for thread in threads:
        thread.start()
    time.sleep(args.warmup)

    rss: list[int] = []
    with counters.lock:
        counters.measuring = True
    started, cpu_start = time.monotonic(), _cpu_s(serve.pid)
    while (elapsed := time.monotonic() - started) < args.duration:
        rss.append(_rss_kib(serve.pid))
        time.sleep(min(1.0, max(0.0, args.duration - elapsed)))
    with counters.lock:
        counters.measuring = False
        elapsed = time.monotonic() - started
        spans, requests, refused, errors = (
            counters.spans,
            counters.requests,
            counters.refused,
            counters.errors,
        )
    cpu = (_cpu_s(serve.pid) - cpu_start) / elapsed
    rss.append(_rss_kib(serve.pid))
    stop.set()
    for thread in threads:
        thread.join(35)
    if channel is not None:
        channel.close()
    serve.send_signal(signal.SIGTERM)
    _, summary = serve.communicate(timeout=120)

    result = {
        "transport": args.transport,
        "duration_s": round(elapsed, 1),
        "senders": args.senders,
        "spans_per_request": len(batches[0].spans),
        "request_kib": round(len(batches[0].payload()) / 1024),
        "sample_rate": args.sample_rate,
        "spans_per_s": round(spans / elapsed),
        "requests": requests,
        "refused_503": refused,
        "errors": errors,
        "serve_cpu_cores": round(cpu, 2),
        "rss_mib_start": round(rss[0] / 1024, 1),
        "rss_mib_middle": round(rss[len(rss) // 2] / 1024, 1),
        "rss_mib_end": round(rss[-1] / 1024, 1),
        "rss_mib_max": round(max(rss) / 1024, 1),
        "exit_status": serve.returncode,
    }
    rate = f"{result['spans_per_s']:,}"
    print(f"serve ({args.transport}, pinned to cpu {args.serve_cpu}): {rate} spans/s accepted")
    size = f"{len(batches[0].spans)} spans ({result['request_kib']} KiB)"
    print(
        f"  {requests} requests of {size} in {elapsed:.1f} s; refused (503/UNAVAILABLE) {refused}; "
        f"errors {errors}; serve CPU {cpu:.2f} cores"
    )
    print(
        f"  RSS MiB: start {result['rss_mib_start']}, middle {result['rss_mib_middle']}, "
        f"end {result['rss_mib_end']}, max {result['rss_mib_max']}"
    )
    print("  " + summary.strip().replace("\n", "\n  "))
    print(json.dumps(result))
    return 0 if serve.returncode == 0 and errors == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
