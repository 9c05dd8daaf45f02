"""Issue 9 item 6: behind one ``serve`` replica pool, every result says which application it evaluated.

Two applications (``service.name`` app-a with namespace and environment, app-b without) export real
OTLP/HTTP spans of GenAI-convention RAG turns to ``serve``'s real ``TraceReceiver`` (``_serve_app.py``, a
subprocess whose own ``service.name`` is ``ctxutil-evaluator``); a real Prometheus scrapes the evaluator
and evaluates deploy/alerts.yaml. Both names must show on the metrics and on the recording rules the
dashboard and the alerts use, with the utilization of each application its own.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from ._promql import DEPLOY
from .conftest import PrometheusServer, line_child, wait_until

JOB = "ctxutil-evaluator"
WAIT_S = 30.0
CHUNKS = (
    "Green tea contains antioxidants called catechins.",
    "The antioxidants in green tea reduce inflammation.",
    "Tea originated in China thousands of years ago.",
)
QUESTION = "What are the benefits of green tea?"
ANSWERS = {
    # app-a uses both relevant chunks, app-b ignores them: their utilizations differ.
    "app-a": "Green tea contains antioxidants called catechins, and the antioxidants reduce inflammation.",
    "app-b": "Drink water every day.",
}
RESOURCES = {
    "app-a": {"service.name": "app-a", "service.namespace": "shop", "deployment.environment.name": "prod"},
    "app-b": {"service.name": "app-b"},
}
TURNS = 3


@pytest.fixture(scope="module")
def serve(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str]]]:
    log = tmp_path_factory.mktemp("serve") / "stderr.log"
    with line_child(Path(__file__).with_name("_serve_app.py"), log) as child:
        yield child.process, child.lines


def _receive(lines: queue.Queue[str]) -> dict[str, Any]:
    try:
        message: dict[str, Any] = json.loads(lines.get(timeout=WAIT_S))
    except queue.Empty:
        raise AssertionError(f"the serve process answered nothing within {WAIT_S} s") from None
    return message


def _send_turns(app: str, otlp_http_port: int) -> None:
    provider = TracerProvider(resource=Resource.create(RESOURCES[app]))
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{otlp_http_port}/v1/traces"))
    )
    tracer = provider.get_tracer("tests.sender")
    documents = json.dumps([{"id": f"doc-{i}", "score": 0.9, "content": c} for i, c in enumerate(CHUNKS)])
    output = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWERS[app]}]}])
    for _ in range(TURNS):
        with tracer.start_as_current_span(
            "invoke_workflow rag", attributes={"gen_ai.operation.name": "invoke_workflow"}
        ):
            retrieval = {
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": documents,
            }
            with tracer.start_as_current_span("retrieval tea", attributes=retrieval):
                pass
            chat = {"gen_ai.operation.name": "chat", "gen_ai.output.messages": output}
            with tracer.start_as_current_span("chat model", attributes=chat):
                pass
    provider.shutdown()


@pytest.fixture(scope="module")
def prometheus(
    serve: tuple[subprocess.Popen[str], queue.Queue[str]],
    start_prometheus: Callable[[str, list[Path]], PrometheusServer],
    tmp_path_factory: pytest.TempPathFactory,
) -> PrometheusServer:
    process, lines = serve
    ports = _receive(lines)
    rules = re.sub(r"\s+offset\s+1h\b", "", (DEPLOY / "alerts.yaml").read_text(encoding="utf-8"))
    rule_file = tmp_path_factory.mktemp("rules") / "alerts.yaml"
    rule_file.write_text(rules, encoding="utf-8")
    server = start_prometheus(
        f"  - job_name: {JOB}\n    static_configs:\n      - targets: ['127.0.0.1:{ports['metrics_port']}']\n",
        [rule_file],
    )
    # Two batches with scrapes between them, so the counters increase inside the rate windows.
    for batch in (1, 2):
        for app in RESOURCES:
            _send_turns(app, ports["otlp_http_port"])
        assert process.stdin is not None
        process.stdin.write("flush\n")
        process.stdin.flush()
        answer = _receive(lines)
        assert answer["flushed"] and answer["evaluated"] == 2 * TURNS * batch, answer
        since_ms = time.time() * 1000
        wait_until(
            lambda since=since_ms: _scrapes_since(server, since) >= 1, WAIT_S, f"a scrape after batch {batch}"
        )
    return server


def _scrapes_since(server: PrometheusServer, since_ms: float) -> int:
    data = server.api("query", query=f'ctxutil_chunks_relevant_total{{job="{JOB}"}}[2m]')
    times = {float(t) * 1000 for series in data["result"] for t, _ in series["values"]}
    return sum(1 for t in times if t > since_ms)


def _by_service(server: PrometheusServer, expr: str) -> dict[str, dict[str, str]]:
    return {s["metric"].get("ctxutil_evaluated_service_name", ""): s["metric"] for s in server.query(expr)}


def test_both_senders_are_named_on_the_scraped_metrics(prometheus: PrometheusServer) -> None:
    series = wait_until(
        lambda: (
            len(found := _by_service(prometheus, f'ctxutil_chunks_relevant_total{{job="{JOB}"}}')) == 2
            and found
        ),
        WAIT_S,
        "both senders on ctxutil_chunks_relevant_total",
    )
    assert set(series) == {"app-a", "app-b"}
    assert series["app-a"]["ctxutil_evaluated_service_namespace"] == "shop"
    assert series["app-a"]["ctxutil_evaluated_deployment_environment_name"] == "prod"
    assert "ctxutil_evaluated_service_namespace" not in series["app-b"]
    assert {s["job"] for s in series.values()} == {JOB}  # the evaluator's own name stays on `job`
    scores = _by_service(prometheus, f'gen_ai_evaluation_score_count{{job="{JOB}"}}')
    assert set(scores) == {"app-a", "app-b"}


def test_recording_rules_keep_each_application_apart(prometheus: PrometheusServer) -> None:
    ratios = wait_until(
        lambda: len(found := _by_service(prometheus, "ctxutil:utilization:ratio_rate5m")) == 2 and found,
        WAIT_S,
        "the pooled utilization rule per sender",
    )
    assert set(ratios) == {"app-a", "app-b"}
    values = {
        s["metric"]["ctxutil_evaluated_service_name"]: float(s["value"][1])
        for s in prometheus.query("ctxutil:utilization:ratio_rate5m")
    }
    assert values["app-a"] > values["app-b"]


def test_dashboard_service_variable_lists_the_senders(prometheus: PrometheusServer) -> None:
    dashboard = json.loads(
        (DEPLOY / "grafana" / "dashboards" / "ctxutil-otel.json").read_text(encoding="utf-8")
    )
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    query = variables["service"]["query"]
    text = query["query"] if isinstance(query, dict) else query
    match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", text)
    assert match is not None and match.group(2) == "ctxutil_evaluated_service_name"
    selector = re.sub(r"\$\{?\w+\}?", ".*", match.group(1))
    names = wait_until(
        lambda: (
            {s["metric"].get("ctxutil_evaluated_service_name") for s in prometheus.query(selector)} - {None}
        ),
        WAIT_S,
        "series for the service variable",
    )
    assert names == {"app-a", "app-b"}
