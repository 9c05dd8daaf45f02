"""Smoke test of ``benchmarks/bench_callback.py``: it runs end to end at a tiny size and writes its figures.

Real parts throughout: the script runs as a subprocess with the real chain, handler, evaluator, the
OpenAI-compatible judge server (its own child process on 127.0.0.1) and the OpenTelemetry SDK. No timing is
asserted (speed lives in the benchmark's own figures); the outcome accounting and the bounded run table are.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_callback.py"
OURS = ("ctxutil_0.01", "ctxutil_1.0_io")
ROWS = ("baseline", "floor", "floor_again", *OURS, "ctxutil_1.0_io_cap10")
FIGURES = ("mean_ms", "p50_ms", "p99_ms", "ratio_to_floor", "ratio_to_baseline", "thread_cpu_ms")


def _outcomes(counts: dict[str, int]) -> int:
    """sampled_out + dropped + evaluated + not_applicable + failed, from the flattened counts."""
    fixed = counts["sampled_out"] + counts["evaluated"] + counts["not_applicable"]
    return fixed + sum(n for key, n in counts.items() if key.startswith(("dropped.", "failed.")))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    out = tmp_path_factory.mktemp("bench") / "figures.json"
    command = [
        sys.executable,
        str(SCRIPT),
        "--iterations", "200",
        "--rounds", "2",
        "--warmup", "20",
        "--pending-roots", "1000",
        "--max-pending-runs", "300",
        "--skip-third-party",
        "--json", str(out),
    ]  # fmt: skip
    # The timeout guards against a hang, not speed: under load the run has taken over 100 s.
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done, json.loads(out.read_text(encoding="utf-8"))


def test_prints_the_table_and_skips_third_party_with_a_message(
    run: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    done, report = run
    assert "configuration" in done.stdout and "x floor" in done.stdout
    for name in ROWS:
        assert name in done.stdout
    for name in ("langfuse", "openinference"):
        assert report["configurations"][name]["status"] == "skipped: --skip-third-party"
        assert f"{name}: skipped: --skip-third-party" in done.stderr


def test_every_configuration_has_its_figures(
    run: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    _, report = run
    assert {"command", "environment", "settings", "configurations", "memory", "targets_met"} <= set(report)
    assert report["settings"]["iterations"] == 200
    configurations = report["configurations"]
    for name in ROWS:
        row = configurations[name]
        assert row["status"] == "ok" and row["invocations"] == 200
        for key in FIGURES:
            assert isinstance(row[key], float) and row[key] > 0, (name, key)
        assert len(row["ratio_to_floor_rounds"]) == 2
    assert configurations["floor"]["ratio_to_floor"] == 1.0
    for name in OURS:  # the verdict follows from the ratio and the target, not printed independently
        row = configurations[name]
        assert row["target_met"] is (row["ratio_to_floor"] <= row["target_ratio"]), (name, row)


def test_our_outcomes_are_all_accounted_for(
    run: tuple[subprocess.CompletedProcess[str], dict[str, Any]],
) -> None:
    _, report = run
    for name in OURS:
        details = report["configurations"][name]["details"]
        assert details["evaluations_per_s_in_blocks"] >= 0
        counts = details["evaluator"]
        assert counts["captured"] == 200, (name, counts)
        assert counts["in_flight"] == 0 and counts["queue_size"] == 0, (
            name,
            counts,
        )  # flushed after each block
        assert _outcomes(counts) == counts["captured"], (name, counts)
        assert not any(key.startswith("callback_errors.") for key in counts), (name, counts)
    sampled = report["configurations"]["ctxutil_1.0_io"]["details"]["evaluator"]
    assert sampled["sampled_out"] == 0 and sampled["evaluated"] + sampled["not_applicable"] > 0


def test_memory_figures(run: tuple[subprocess.CompletedProcess[str], dict[str, Any]]) -> None:
    _, report = run
    for name in OURS:
        row = report["memory"]["run"][name]
        assert row["invocations"] == 200 and row["max_queue_size"] == 2048
        assert row["rss_start_mb"] > 0 and row["rss_end_mb"] > 0 and isinstance(row["within_limit"], bool)
        after = row["evaluator_after_shutdown"]
        assert after["captured"] == 200 and _outcomes(after) == 200, after
    roots = report["memory"]["never_ending_roots"]
    assert roots["roots"] == 1000 and roots["max_pending_runs"] == 300
    assert 0 < roots["pending_runs"] <= 300 and roots["bounded"] is True
    assert roots["captured"] == 1000  # sample_rate 1.0: every root captured, none ended
    assert roots["dropped_pending_full"] == 1000 - roots["pending_runs"]  # every evicted root counted
    assert roots["dropped_ttl_expired"] == 0  # evicted for room, not for age
    assert roots["rss_at_bound_mb"] > 0 and roots["callback_errors"] == {}
