"""Smoke test of ``benchmarks/bench_process_worker.py``: it runs end to end at a tiny size and writes its
figures. Real parts throughout (the script as a subprocess, the chain, both workers, a spawned child, the
OpenAI-compatible judge server in its own process, the OpenTelemetry SDK). No timing is asserted; the rows,
the child's memory and the accounting are."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_process_worker.py"


def test_runs_both_workers_and_reports_the_child(tmp_path: Path) -> None:
    out = tmp_path / "figures.json"
    command = [
        sys.executable, str(SCRIPT),
        "--iterations", "40", "--rounds", "2", "--warmup", "5", "--judges", "lexical",
        "--json", str(out),
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    rows = report["configurations"]
    assert {"baseline", "floor", "floor_again", "lexical_thread", "lexical_process"} <= set(rows)
    assert rows["lexical_thread"]["details"]["child_rss_mb"] is None
    assert rows["lexical_process"]["details"]["child_rss_mb"] > 0
    assert report["bare_child_rss_mb"]["lexical"] > 0
    for name in ("lexical_thread", "lexical_process"):
        counts = rows[name]["details"]["evaluator"]
        finished = counts["evaluated"] + counts["not_applicable"]
        finished += sum(n for key, n in counts.items() if key.startswith(("dropped.", "failed.")))
        assert counts["captured"] == finished + counts["sampled_out"]  # shut down: nothing in flight
        assert not any(key.startswith("failed.") for key in counts)
