"""Zero-code: the real ``opentelemetry-instrument`` launcher runs a LangChain RAG app that has no ctxutil-otel
code (``_rag_app.py``); ``CTXUTIL_*`` variables configure the evaluation; everything is exported over real
OTLP/gRPC to a local receiver (tests/support/otlp_receiver.py). The launcher's SDK set-up comes from
``opentelemetry-distro`` (the test extra)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxutil_otel.emit import names as n
from tests.support.otlp_receiver import OTLPReceiver, attributes_of

APP = Path(__file__).with_name("_rag_app.py")
QUESTIONS = ("What are the benefits of green tea?", "Does green tea reduce inflammation?")
LAUNCHER = Path(sys.executable).with_name("opentelemetry-instrument")


def _run_app(receiver: OTLPReceiver, **extra_env: str) -> dict[str, Any]:
    if not LAUNCHER.exists():
        pytest.fail(f"{LAUNCHER} missing: install the test extra (opentelemetry-distro)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXUTIL_", "OTEL_"))}
    env.update(
        {
            "OTEL_SERVICE_NAME": "tea-rag-app",
            "OTEL_TRACES_EXPORTER": "otlp",
            "OTEL_METRICS_EXPORTER": "otlp",
            "OTEL_LOGS_EXPORTER": "otlp",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_endpoint,
            "CTXUTIL_APPLICATION_NAME": "zero-code-bot",
            "CTXUTIL_MAX_EVALUATIONS_PER_SECOND": "0",
            "CTXUTIL_MAX_WORKER_CPU_FRACTION": "0",
            **extra_env,
        }
    )
    done = subprocess.run(
        [str(LAUNCHER), sys.executable, str(APP), *QUESTIONS],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    answer: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    answer["stderr"] = done.stderr
    return answer


def test_opentelemetry_instrument_turns_evaluation_on_with_ctxutil_variables() -> None:
    with OTLPReceiver() as receiver:
        # Only ours: OpenInference's LangChain instrumentor (installed for other tests) is switched off.
        answer = _run_app(receiver, OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="langchain")
        assert len(answer["answers"]) == len(QUESTIONS)
        # The process has exited: its providers flushed at exit, so everything has arrived.
        spans = receiver.spans(n.SPAN_EVALUATION)
        assert len(spans) == len(QUESTIONS)
        for span in spans:
            attrs = attributes_of(span)
            assert attrs[n.ATTR_APPLICATION_NAME] == "zero-code-bot"
            assert attrs[n.ATTR_INTERACTION_SOURCE] == "langchain"
            assert attrs[n.ATTR_EVALUATION_SCORE_LABEL] in {"pass", "fail"}
        assert {r.get("service.name") for r in receiver.resources()} == {"tea-rag-app"}
        events = [r for r in receiver.log_records() if r.event_name == n.EVENT_EVALUATION_RESULT]
        by_name = [attributes_of(r)[n.ATTR_EVALUATION_NAME] for r in events]  # and the retrieval halves
        assert by_name.count("contextual_utilization") == len(QUESTIONS)
        points = [p for m in receiver.metrics(n.METRIC_EVALUATION_SCORE) for p in m.histogram.data_points]
        assert points and max(p.count for p in points) == len(QUESTIONS)


def test_a_ctxutil_variable_that_is_invalid_is_reported_and_the_app_still_runs() -> None:
    with OTLPReceiver() as receiver:
        answer = _run_app(
            receiver, OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="langchain", CTXUTIL_SAMPLE_RATE="lots"
        )
        assert len(answer["answers"]) == len(QUESTIONS)
        assert receiver.spans(n.SPAN_EVALUATION) == []
        assert "CTXUTIL_SAMPLE_RATE" in answer["stderr"], answer["stderr"][-2000:]
