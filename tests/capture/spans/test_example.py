"""examples/span_processor_openinference.py runs offline, as a user would run it (a subprocess)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.env import environ_without_settings

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "span_processor_openinference.py"


def test_example_evaluates_every_row() -> None:
    env = environ_without_settings("OPENAI_")
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--rows", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[:2] == ["evaluated", "span"]
    results = [line for line in lines[1:] if re.match(r"^[0-9a-f]{16}  ", line)]
    assert len(results) == 4
    assert all(line.split()[1] in {"pass", "fail", "not_applicable"} for line in results)
    stats = lines[-1]
    assert "captured=4" in stats and "dropped={}" in stats and "failed={}" in stats
    assert "Traceback" not in done.stderr
