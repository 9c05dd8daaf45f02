"""The process worker never runs the application's main module in its child (issue 23 item 4).

Before, the child was started the way ``multiprocessing`` starts any ``spawn`` child: it imported the
application's main module again (as ``__mp_main__``). A script without an ``if __name__ == "__main__":``
guard ran its whole top level in the child: its chain called again, a ``RuntimeError`` traceback
(``multiprocessing``'s "bootstrapping phase" error: the child tried to start a child of its own) and every
evaluation failed ``worker_crashed``. Real parts: a LangChain chain with the callback handler, a real
spawned child, the lexical judge, the script run as a real ``python script.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

# No guard: the top level is the application, as many scripts, notebooks turned scripts and prefork
# servers' app modules are written.
_UNGUARDED = """
import json, os, sys
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from ctxutil_otel import UtilizationCallbackHandler

LOG = sys.argv[1]

def note(what):
    with open(LOG, "a", encoding="utf-8") as f:
        f.write(f"{what} {os.getpid()}\\n")

note("top-level")

class Shelf(BaseRetriever):
    def _get_relevant_documents(self, query, *, run_manager):
        return [Document(page_content="Green tea is made from unoxidised leaves."),
                Document(page_content="Paris is the capital of France.")]

def prompt(docs):
    note("chain")
    return "\\n".join(d.page_content for d in docs)

model = FakeListChatModel(responses=["Green tea is made from unoxidised leaves."])
chain = Shelf() | RunnableLambda(prompt) | model
handler = UtilizationCallbackHandler(worker="process", judge="lexical", sample_rate=1.0,
                                     max_evaluations_per_second=0)
for _ in range(3):
    chain.invoke("what is green tea made from", config={"callbacks": [handler]})
assert handler.force_flush(120_000)
stats = handler.stats()
counts = {"evaluated": stats.evaluated, "failed": dict(stats.failed), "dropped": dict(stats.dropped)}
print(json.dumps(counts))
handler.shutdown()
"""


def test_a_script_without_a_main_guard_runs_once(tmp_path: Path) -> None:
    script = tmp_path / "app.py"
    script.write_text(_UNGUARDED, encoding="utf-8")
    log = tmp_path / "calls.log"
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(script), str(log)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(repo)},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    lines = log.read_text(encoding="utf-8").split()
    assert lines[0::2] == ["top-level", "chain", "chain", "chain"]  # once, and once a request
    assert set(lines[1::2]) == {lines[1]}  # all in the application's process, none in the child
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    assert stats == {"evaluated": 3, "failed": {}, "dropped": {}}


def test_only_the_evaluators_children_leave_the_main_module_out() -> None:
    # The application's own children (other threads, outside the evaluator's start) are prepared as usual.
    import multiprocessing.spawn
    import threading

    from ctxutil_otel.worker._no_main import MAIN_KEYS, main_module_hidden

    usual = multiprocessing.spawn.get_preparation_data("app-child")
    assert any(key in usual for key in MAIN_KEYS)  # pytest's own __main__, by name or path
    seen: list[dict[str, object]] = []
    with main_module_hidden():
        hidden = multiprocessing.spawn.get_preparation_data("ctxutil-evaluator-child")
        other = threading.Thread(target=lambda: seen.append(multiprocessing.spawn.get_preparation_data("x")))
        other.start()
        other.join()
    assert not any(key in hidden for key in MAIN_KEYS)
    assert {k: seen[0].get(k) for k in MAIN_KEYS} == {k: usual.get(k) for k in MAIN_KEYS}
    assert multiprocessing.spawn.get_preparation_data("again") == {**usual, "name": "again"}
