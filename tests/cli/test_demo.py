"""``ctxutil-otel demo``: the README's main job, on the console and over OTLP to a real receiver."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ctxutil_otel.data import load_sample

from ..support.env import environ_without_settings
from ..support.otlp_receiver import OTLPReceiver, attributes_of
from .conftest import run_demo


def test_demo_shows_the_results_not_the_telemetry_by_default() -> None:
    # A first run (the README's first command) must show its result: before, about 110 lines of telemetry
    # came first. Now none is printed, the table is headed, and the last line says what was made.
    proc = run_demo("--limit", "8")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert not any(line.startswith(("[span]", "[event]", "[metric]")) for line in lines)
    assert lines[1].startswith("Results: Contextual Utilization per question (score = used / relevant chunks")
    assert lines[3].startswith("  #  id")
    for row in load_sample()[:8]:
        assert row["id"][:22] in proc.stdout
    # Per question: the rag.interaction span and its evaluation span; two events per result (docs/slices.md).
    assert lines[-1] == (
        "telemetry: 16 spans, 16 log events and the metrics made, not printed or sent (--show-telemetry "
        "prints it; OTEL_EXPORTER_OTLP_ENDPOINT sends it over OTLP)"
    )
    assert "telemetry -> not printed or sent" in proc.stderr


def test_demo_show_telemetry_prints_it_before_the_results() -> None:
    proc = run_demo("--limit", "8", "--show-telemetry")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.count("[span] contextual_utilization") == 8
    # Per result: the utilization event and its retrieval half (contextual_relevancy), docs/slices.md.
    assert out.count("[event] gen_ai.evaluation.result") == 16
    assert "[metric] gen_ai.evaluation.score" in out
    rows = load_sample()[:8]
    summary = out[out.index("Results: ") :]
    assert not any(tag in summary for tag in ("[span]", "[event]", "[metric]"))  # the results come last
    for row in rows:
        assert row["id"][:22] in summary
    assert "evaluator: captured 8, sampled out 0, not selected 0, evaluated" in summary
    events = [line for line in out.splitlines() if line.startswith("[event] gen_ai.evaluation.result")]
    assert sum("evaluation=contextual_relevancy" in line for line in events) == 8
    assert sum("evaluation=contextual_utilization" in line for line in events) == 8
    assert "agreement with the labels" in summary and "mean utilization" in summary
    assert re.fullmatch(
        r"telemetry \(traces: console, metrics: console, logs: console\): 16 spans, 16 log events and the "
        r"metrics; \d+ exports delivered within 5 s",
        summary.splitlines()[-1],
    ), summary


def test_demo_quiet_prints_only_the_summary() -> None:
    proc = run_demo("--limit", "3", "--quiet")  # the default now; kept for existing scripts
    assert proc.returncode == 0, proc.stderr
    assert "[span]" not in proc.stdout and "[metric]" not in proc.stdout
    assert "questions run: 3 in " in proc.stdout and "distinct questions evaluated: 3" in proc.stdout
    assert run_demo("--limit", "1", "--quiet", "--show-telemetry").returncode == 2  # one or the other


def test_demo_sample_rate_zero_evaluates_nothing_and_says_so() -> None:
    proc = run_demo("--limit", "5", "--quiet", "--sample-rate", "0")
    assert proc.returncode == 0, proc.stderr
    assert "captured 5, sampled out 5, not selected 0, evaluated 0" in proc.stdout


def test_demo_rejects_a_bad_setting_naming_it() -> None:
    proc = run_demo("--limit", "2", "--sample-rate", "1.5")
    assert proc.returncode == 2
    assert "sample_rate" in proc.stderr


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_demo_delivers_spans_events_and_metrics_over_otlp(protocol: str) -> None:
    with OTLPReceiver() as receiver:
        endpoint = receiver.grpc_endpoint if protocol == "grpc" else receiver.http_endpoint
        proc = run_demo(
            "--limit",
            "6",
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
                "OTEL_SERVICE_NAME": "demo-under-test",
            },
        )
        assert proc.returncode == 0, proc.stderr
        # The demo shuts its providers down before exiting, so everything has arrived by now.
        evaluations = receiver.spans("contextual_utilization")
        assert len(evaluations) == 6
        roots = {s.span_id: s for s in receiver.spans("rag.interaction")}
        for span in evaluations:
            attrs = attributes_of(span)
            assert attrs["gen_ai.evaluation.name"] == "contextual_utilization"
            assert attrs["gen_ai.evaluation.score.label"] in {"pass", "fail", "not_applicable"}
            assert span.parent_span_id in roots  # parented inside the interaction's trace
            assert "ctxutil.chunks.0.text" not in attrs  # content capture is off by default
        assert {r.get("service.name") for r in receiver.resources()} == {"demo-under-test"}
        records = receiver.log_records()
        assert len(records) == 12  # per result: utilization and its retrieval half (contextual_relevancy)
        assert {r.event_name for r in records} == {"gen_ai.evaluation.result"}
        assert sorted(attributes_of(r)["gen_ai.evaluation.name"] for r in records) == sorted(
            ["contextual_utilization", "contextual_relevancy"] * 6
        )
        assert {bytes(r.span_id) for r in records} == {bytes(s.span_id) for s in roots.values()}
        assert receiver.metrics("gen_ai.evaluation.score")
        assert receiver.metrics("ctxutil.evaluations")
        assert set(receiver.transports) == {"grpc" if protocol == "grpc" else "http"}
    assert "[span]" not in proc.stdout  # OTLP configured: nothing printed but the summary


def test_demo_loop_keeps_sending_until_sigterm_then_summarises() -> None:
    import signal

    base = environ_without_settings()
    with OTLPReceiver() as receiver:
        env = {
            **base,
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "50",  # export spans promptly so the test sees each pass
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "ctxutil_otel", "demo", "--limit", "2", "--loop", "--interval", "0.05"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            # Three passes of two questions prove the loop repeats (the first pass alone gives two).
            assert receiver.wait_for(lambda r: len(r.spans("contextual_utilization")) >= 6, timeout_s=60)
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0, err
    captured = int(out.split("evaluator: captured ")[1].split(",")[0])
    assert captured >= 6 and captured % 2 == 0
    passes = captured // 2  # two questions per pass: the summary says how many passes ran
    assert f"questions run: 2 × {passes} passes ({captured} runs)" in out


def test_demo_takes_content_capture_and_application_name_from_the_environment() -> None:
    rows = load_sample()[:2]
    with OTLPReceiver() as receiver:
        proc = run_demo(
            "--limit",
            "2",
            env={
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.grpc_endpoint,
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
                "CTXUTIL_APPLICATION_NAME": "support-bot",
                "CTXUTIL_MAX_CONTENT_CHARS": "40",
            },
        )
        assert proc.returncode == 0, proc.stderr
        texts = [
            attributes_of(span).get("ctxutil.chunks.0.text")
            for span in receiver.spans("contextual_utilization")
        ]
        assert len(texts) == 2 and all(len(str(t)) <= 40 for t in texts)
        for row in rows:  # truncated to 40 characters, the last one an ellipsis
            assert any(row["retrieved_content"][0].startswith(str(t).rstrip("…")) for t in texts)
        points = [p for m in receiver.metrics("gen_ai.evaluation.score") for p in m.histogram.data_points]
        assert points and {attributes_of(p)["ctxutil.application.name"] for p in points} == {"support-bot"}


def test_demo_data_with_broken_lines_reports_them_and_exits_non_zero(
    tmp_path: pytest.TempPathFactory,
) -> None:
    import json
    from pathlib import Path

    row = load_sample(limit=1)[0]
    data = Path(str(tmp_path)) / "data.jsonl"
    data.write_bytes(json.dumps(row).encode() + b"\n{broken\n\xff\xfe\n")
    proc = run_demo("--data", str(data), "--quiet")
    assert proc.returncode == 1
    assert ":2: invalid JSON" in proc.stderr and ":3: not valid UTF-8" in proc.stderr
    assert "evaluator: captured 1," in proc.stdout


def test_demo_loop_sigterm_during_the_first_pass_still_flushes() -> None:
    import signal

    base = environ_without_settings()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxutil_otel",
            "demo",
            "--limit",
            "0",
            "--quiet",
            "--loop",
            "--interval",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=base,
    )
    try:
        assert proc.stderr is not None
        # The banner is printed just before the first pass starts: the signal handler is installed by then.
        banner = proc.stderr.readline()
        assert "questions through an LCEL RAG chain" in banner
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "evaluator: captured" in out
