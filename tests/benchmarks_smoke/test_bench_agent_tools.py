"""Smoke test of ``benchmarks/bench_agent_tools.py``: it runs end to end at a tiny size and writes its
figures. Real parts: LangGraph's ReAct agent, the real handler and Evaluator, SDK providers exporting
nowhere. No timing is asserted (speed lives in the benchmark's own figures); the accounting is."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_agent_benchmark_runs_and_accounts_for_every_turn(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_agent_tools.py")]
    command += ["--iterations", "5", "--rounds", "1", "--json", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert set(figures) == {"floor", "floor_again", "ctxutil_0.01", "ctxutil_1.0"}
    for name in ("ctxutil_0.01", "ctxutil_1.0"):
        assert figures[name]["captured"] == figures[name]["outcomes"] == 10  # warm-up 5 + 5 turns


def test_a_large_tool_result_at_one_rate_runs_and_reports_the_invoking_threads_cpu(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "bench_agent_tools.py")]
    command += [
        "--iterations",
        "5",
        "--rounds",
        "1",
        "--passages",
        "200",
        "--rates",
        "0.01",
        "--json",
        str(out),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert set(figures) == {"floor", "floor_again", "ctxutil_0.01"}
    assert figures["ctxutil_0.01"]["captured"] == figures["ctxutil_0.01"]["outcomes"] == 10
    assert all(row["thread_cpu_ms"] > 0 and row["thread_cpu_ratio_to_floor"] > 0 for row in figures.values())
