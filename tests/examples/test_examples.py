"""Every example in examples/ runs offline and does what its docstring says."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ..support.env import environ_without_settings
from ..support.otlp_receiver import OTLPReceiver, attributes_of

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(script: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = environ_without_settings("OPENAI_")
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def _stats(stdout: str) -> dict[str, int]:
    match = re.search(r"EvaluatorStats\((.*?)\)", stdout)
    assert match, stdout[-1000:]
    return {
        k: int(v) for k, v in re.findall(r"(captured|sampled_out|evaluated|not_applicable)=(\d+)", match[1])
    }


def test_langchain_callback_example_evaluates_every_question() -> None:
    proc = _run("langchain_callback.py", "3")
    assert proc.stdout.count("[span] contextual_utilization") == 3
    stats = _stats(proc.stdout)
    assert stats["captured"] == 3 and stats["evaluated"] + stats["not_applicable"] == 3


def test_async_stream_example_assembles_streamed_answers() -> None:
    proc = _run("langchain_async_stream.py", "4")
    assert proc.stdout.count("ainvoke  Q:") == 2 and proc.stdout.count("astream  Q:") == 2
    assert proc.stdout.count("[event] gen_ai.evaluation.result") == 8  # each with its contextual_relevancy
    assert _stats(proc.stdout)["captured"] == 4


def test_configure_exporters_example_samples_by_trace_id_and_exports_over_otlp() -> None:
    with OTLPReceiver() as receiver:
        proc = _run("configure_exporters_and_sampling.py", f"127.0.0.1:{receiver.grpc_port}")
        stats = _stats(proc.stdout)
        assert stats["captured"] == 20
        assert 0 < stats["sampled_out"] < 20  # a 50% sample of 20 random trace ids
        spans = receiver.spans("contextual_utilization")
        assert len(spans) == stats["evaluated"] + stats["not_applicable"]
        attrs = attributes_of(spans[0])
        assert "ctxutil.chunks.0.text" in attrs  # content capture was turned on in code
        assert len(str(attrs["ctxutil.chunks.0.text"])) <= 200
        assert attrs["ctxutil.threshold"] == 0.6
        assert {r.get("service.name") for r in receiver.resources()} == {"rag-api"}
