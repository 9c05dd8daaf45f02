"""Every instrumentation we claim, tested with the instrumentation itself (issue 15 item 2).

Real parts: Traceloop's ``opentelemetry-instrumentation-langchain`` (OpenLLMetry) and OpenTelemetry's own
``opentelemetry-instrumentation-genai-langchain``, at the versions pinned in pyproject.toml's test extra,
each instrumenting the demo's real LCEL RAG chain (real LangChain runnables replaying three bundled
RAGBench rows) in a subprocess (tests/capture/spans/instrumented_run.py: their patching of LangChain's
callback manager is process-wide), with :class:`UtilizationSpanProcessor` on the real ``TracerProvider``
and the real Evaluator and LexicalJudge. OpenInference's instrumentation is tested in-process
(test_openinference.py, test_composite_retrievers.py): it uninstruments cleanly.

Before routing by what a span is, the Traceloop runs gave ``captured=0``: its retriever spans carry
``gen_ai.operation.name=vector_db_retrieve``, the GenAI reader refused them and the OpenLLMetry reader
never saw them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[3]
TESTED_VERSIONS = {
    "traceloop": "0.62.4",  # opentelemetry-instrumentation-langchain
    "otel-genai": "1.3b0",  # opentelemetry-instrumentation-genai-langchain
}
_RUN_TIMEOUT_S = 300  # a hang bound for the subprocess, not a speed assertion


def run(*args: str) -> dict[str, Any]:
    env = {
        k: v for k, v in os.environ.items() if not k.upper().startswith(("CTXUTIL_", "TRACELOOP_", "OTEL_"))
    }
    env["CTXUTIL_MAX_WORKER_CPU_FRACTION"] = "0"  # as in the whole suite (tests/conftest.py)
    done = subprocess.run(
        [sys.executable, "-m", "tests.capture.spans.instrumented_run", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=_RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["stderr"] = done.stderr
    return result


def _clean(result: dict[str, Any]) -> None:
    assert result["errors"] == 0 and result["pending"] == 0
    stats = result["stats"]
    assert stats["captured"] == (
        stats["evaluated"] + stats["not_applicable"] + stats["failed"] + sum(stats["dropped"].values())
    )


@pytest.mark.parametrize("flags", [(), ("--compression",)], ids=["chain", "compression"])
def test_openllmetry_turns_are_captured_and_judged_on_what_reached_the_model(flags: tuple[str, ...]) -> None:
    result = run("traceloop", *flags)
    assert result["versions"] == {"traceloop": TESTED_VERSIONS["traceloop"]}
    _clean(result)
    assert result["stats"]["captured"] == 3 and result["stats"]["dropped"] == {}
    assert result["stats"]["evaluated"] + result["stats"]["not_applicable"] == 3
    # compression: the outer retriever's two documents, not the base retriever's as well
    assert result["calls"] == result["expected"]


def test_openllmetry_without_content_is_counted_not_evaluable_and_warned_once() -> None:
    result = run("traceloop", "--no-content")
    _clean(result)
    assert result["stats"]["captured"] == 3 and result["stats"]["dropped"] == {"not_evaluable": 3}
    assert result["calls"] == []
    assert result["causes"] == [["content_not_captured", "openllmetry", 3]]
    assert result["stderr"].count("is not evaluable") == 1


def test_opentelemetry_genai_langchain_turns_are_counted_not_evaluable() -> None:
    """OpenTelemetry's own LangChain instrumentation (1.3b0) records each retrieved document's id and
    score only, never its text, even with content capture on (``SPAN_ONLY``): every turn is found
    (retrieval + chat span under the workflow span) and counted ``not_evaluable``
    (``content_not_captured``), never lost. It makes a chat span only for a model with a name
    (``model_name``/``model`` parameter or ``ls_model_name``): the runner's replay model has one."""
    result = run("otel-genai")
    assert result["versions"] == {"otel-genai": TESTED_VERSIONS["otel-genai"]}
    _clean(result)
    assert result["stats"]["captured"] == 3 and result["stats"]["dropped"] == {"not_evaluable": 3}
    assert result["causes"] == [["content_not_captured", "genai", 3]]
    assert result["stderr"].count("is not evaluable") == 1
