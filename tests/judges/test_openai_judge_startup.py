"""OpenAIJudge pays the openai SDK's start-up cost where it is built, not on its first judge call.

The first call usually runs on the evaluator's worker thread, under its CPU budget and holding the GIL
against the application's threads; importing the SDK there cost about 0.3 s of CPU. Which modules are
loaded when is only observable in a fresh interpreter, so the check runs in a subprocess (real openai
client, real HTTP against the test server on 127.0.0.1).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ("openai", "httpx2", "httpcore2", "h11")

PROBE = f"""
import asyncio, json, sys
from ctxutil_otel.judges import OpenAIJudge
from tests.support.openai_server import OpenAICompatServer, verdict_handler

def sdk():
    return sorted(m for m in sys.modules if m.split(".")[0] in {SDK!r})

seen = {{"class_imported": sdk()}}
with OpenAICompatServer(verdict_handler()) as server:
    judge = OpenAIJudge(model="m", base_url=server.base_url, api_key="k")
    seen["constructed"] = sdk()
    result = asyncio.run(judge.judge("green tea", "Green tea.", ["green tea leaves", "rome"]))
    seen["after_first_call"] = sdk()
    seen["verdicts"] = len(result.verdicts)
print(json.dumps(seen))
"""


def test_construction_imports_the_sdk_and_the_first_call_imports_none_of_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])

    assert seen["class_imported"] == []  # `import ctxutil_otel` and the class alone stay light
    assert {"openai", "httpx2", "httpcore2"} <= set(seen["constructed"])  # SDK and first client built
    assert seen["after_first_call"] == seen["constructed"]  # the first judge call imported none of it
    assert seen["verdicts"] == 2
