"""Smoke test of ``benchmarks/bench_worker.py``: it runs end to end at a tiny size and writes its figures.

Real parts: the script runs as a subprocess with a real Evaluator, OpenAIJudge over real HTTP against the
OpenAI-compatible test server (its own child process on 127.0.0.1) and a real Emitter. No timing is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_worker.py"


def test_reports_cpu_per_evaluation_and_rate_for_each_budget(tmp_path: Path) -> None:
    out = tmp_path / "worker.json"
    command = [
        sys.executable, str(SCRIPT),
        "--evaluations", "5", "--judge-delay-ms", "0", "--fractions", "0", "0.5", "--json", str(out),
    ]  # fmt: skip
    # The timeout guards against a hang, not speed: under load the run has taken over 100 s.
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text(encoding="utf-8"))["results"]
    assert [r["max_worker_cpu_fraction"] for r in results] == [0.0, 0.5]
    for row in results:
        assert row["worker_cpu_ms_per_evaluation"] > row["emit_cpu_ms_per_evaluation"] > 0
        assert row["evaluations_per_s"] > 0 and 0 < row["worker_share_of_a_core"] <= 1
    assert done.stdout.count("evaluations/s") == 2
