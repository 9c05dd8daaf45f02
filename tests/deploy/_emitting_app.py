"""A process that evaluates the bundled RAGBench sample and serves its metrics for Prometheus to scrape.

Run by tests/deploy/test_end_to_end.py as ``python _emitting_app.py``. Real parts throughout: the
OpenTelemetry SDK ``MeterProvider`` with ``opentelemetry-exporter-prometheus``'s ``PrometheusMetricReader``,
``prometheus_client``'s HTTP server on 127.0.0.1 (an OS-assigned port), and the project's ``Evaluator`` and
``Emitter`` with the offline ``LexicalJudge``.

Protocol on stdin/stdout (one JSON object per line, so the test synchronises on facts, not on sleeps):

* at start-up it prints ``{"port": N}`` once the metrics endpoint listens;
* ``run A B`` offers rows ``A:B`` of the sample to the evaluator, waits with ``force_flush``, then prints
  ``{"stats": {...}}``: the evaluator's cumulative outcome counts, which the test then waits to see in
  Prometheus;
* ``exit`` (or end of input) shuts the evaluator and the providers down.

To make every outcome and label appear, some rows are routed deliberately (deterministic in the row
index): every 10th trace is left out of the sample by its trace id (``sample_rate`` 0.9 decides), every
25th sampled row is discarded with reason ``chain_error`` (as a capture path does when the chain fails),
the judge raises ``JudgeTimeoutError`` on every 20th row (-> ``failed``, ``error.type`` timeout), and a rate
cap below the batch sizes drops part of each batch with reason ``rate_limited``. The exact counts depend on
timing; the test compares Prometheus against the evaluator's own ``stats()``, never against constants.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import start_http_server

from ctxutil_otel import ContextualUtilization, JudgeResult, LexicalJudge, TokenUsage
from ctxutil_otel.capture import Interaction
from ctxutil_otel.data import load_sample
from ctxutil_otel.emit import Emitter
from ctxutil_otel.judges import JudgeTimeoutError
from ctxutil_otel.worker import Evaluator

APPLICATION_NAME = "e2e-app"
FAIL_EVERY = 20
DISCARD_EVERY = 25
# Evaluations per second (token bucket, burst = the rate): a batch submitted at once exceeds it, so part of
# each batch is dropped with reason rate_limited, as under a traffic spike.
RATE_CAP = 60


class TokenReportingJudge:
    """The offline ``LexicalJudge``'s verdicts, plus a token usage (whitespace words in and out) so that the
    judge-token metric has data, as it would with an LLM judge; raises ``JudgeTimeoutError`` on queries
    marked for failure. A stand-in for an LLM judge, which cannot run offline."""

    name = "lexical+tokens"
    model = None

    def __init__(self, failing_queries: set[str]) -> None:
        self._inner = LexicalJudge()
        self._failing = failing_queries

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        if query in self._failing:
            raise JudgeTimeoutError("deliberate timeout for the end-to-end test")
        result = await self._inner.judge(query, answer, chunks, reasons=reasons)
        words_in = len(query.split()) + len(answer.split()) + sum(len(c.split()) for c in chunks)
        usage = TokenUsage(input_tokens=words_in, output_tokens=4 * len(chunks))
        return JudgeResult(verdicts=result.verdicts, usage=usage)


def trace_id_of(row_index: int) -> int:
    """A deterministic 128-bit trace id per row."""
    return int.from_bytes(hashlib.sha256(f"row-{row_index}".encode()).digest()[:16], "big")


def main() -> int:
    rows = load_sample()
    failing = {row["query"] for i, row in enumerate(rows) if i % FAIL_EVERY == FAIL_EVERY - 1}
    reader = PrometheusMetricReader()
    resource = Resource.create({"service.name": "ctxutil-e2e"})
    meter_provider = MeterProvider(metric_readers=[reader], resource=resource)
    tracer_provider = TracerProvider(resource=resource)
    logger_provider = LoggerProvider(resource=resource)
    server, _thread = start_http_server(0, addr="127.0.0.1")
    emitter = Emitter(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        application_name=APPLICATION_NAME,
    )
    evaluator = Evaluator(
        ContextualUtilization(judge=TokenReportingJudge(failing)),
        emitter=emitter,
        sample_rate=0.9,
        max_evaluations_per_second=RATE_CAP,
    )
    print(json.dumps({"port": server.server_port}), flush=True)
    sampled = 0
    try:
        for line in sys.stdin:
            command = line.split()
            if not command or command[0] == "exit":
                break
            if command[0] != "run":
                print(json.dumps({"error": f"unknown command {line.strip()!r}"}), flush=True)
                continue
            start, stop = int(command[1]), int(command[2])
            for index in range(start, min(stop, len(rows))):
                row = rows[index]
                trace_id = trace_id_of(index)
                ticket = evaluator.admit(trace_id)
                if not ticket:
                    continue
                sampled += 1
                if sampled % DISCARD_EVERY == 0:
                    ticket.drop("chain_error")
                    continue
                ticket.submit(
                    Interaction(
                        query=row["query"],
                        answer=row["actual_output"],
                        documents=row["retrieved_content"],
                        trace_id=trace_id,
                        id=str(row["id"]),
                        source="e2e",
                    )
                )
            flushed = evaluator.force_flush(30_000)
            stats = evaluator.stats()
            print(
                json.dumps(
                    {
                        "flushed": flushed,
                        "stats": {
                            "sampled_out": stats.sampled_out,
                            "dropped": dict(stats.dropped),
                            "evaluated": stats.evaluated,
                            "not_applicable": stats.not_applicable,
                            "failed": dict(stats.failed),
                        },
                    }
                ),
                flush=True,
            )
    finally:
        evaluator.shutdown(5_000)
        meter_provider.shutdown()
        tracer_provider.shutdown()
        logger_provider.shutdown()
        server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
