"""Smoke test of ``benchmarks/bench_record_interaction.py``: it runs end to end at a tiny size and writes its
figures.

Real parts: the script runs as a subprocess with real Evaluators (lexical judge, an emitter that only counts)
and a real OpenTelemetry SDK TracerProvider with a BatchSpanProcessor. No timing is asserted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_record_interaction.py"
CASES = ["span", "sampled_out", "rate_capped", "queued", "queued_metadata"]


def test_reports_each_case_and_its_ratio_to_one_span(tmp_path: Path) -> None:
    out = tmp_path / "record.json"
    command = [sys.executable, str(SCRIPT), "--rounds", "3", "--calls", "2", "--json", str(out)]
    # The timeout guards against a hang, not speed.
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text(encoding="utf-8"))
    assert (figures["rounds"], figures["calls"]) == (3, 2)
    results = figures["results"]
    assert [row["case"] for row in results] == CASES
    for row in results:
        assert row["median_ns"] > 0 and row["ratio_to_span"] > 0
    assert results[0]["ratio_to_span"] == 1.0
    lines = done.stdout.splitlines()
    for case in CASES:
        assert any(line.startswith(f"{case} ") and " ns" in line for line in lines), (case, done.stdout)
    assert done.stdout.count("x span)") == len(CASES) - 1
