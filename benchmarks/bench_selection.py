"""Cost of selection rules for an interaction no rule selects (issue 12, "Speed").

Two measurements, each interleaved (A B A B ...) in one run so that machine load hits both alike:

* ``callback``: an LCEL RAG chain (real LangChain runnables, a fake chat model replaying text) invoked with
  ``UtilizationCallbackHandler`` at ``sample_rate`` 0 (every interaction unselected), without rules vs with
  three rules that match nothing (``root_name``, ``tags``, ``metadata``); a chain without a handler is the
  baseline. Reported: mean milliseconds per invocation, and the ratio of the handler's own cost (the time
  above the baseline) with rules to without.
* ``admit``: ``Evaluator.admit(trace_id)`` (the fast path) vs ``Evaluator.admit(trace_id, facts)`` with the
  three rules, nanoseconds per call.

    python benchmarks/bench_selection.py [--iterations 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnablePassthrough

from ctxutil_otel.capture import UtilizationCallbackHandler
from ctxutil_otel.sampling._rules import SelectionFacts
from ctxutil_otel.worker import Evaluator

RULES: list[dict[str, Any]] = [
    {"root_name": "nomatch-*", "sample_rate": 1.0},
    {"tags": ["nomatch"], "sample_rate": 1.0},
    {"metadata": {"nomatch": "x"}, "sample_rate": 1.0},
]


class Retriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [Document(page_content=f"chunk {i} about {query}") for i in range(4)]


def chain() -> Runnable[Any, str]:
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    model = FakeListChatModel(responses=["an answer"])
    return {"context": Retriever(), "question": RunnablePassthrough()} | prompt | model | StrOutputParser()


def timed(call: Callable[[], object], n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--iterations", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    rag = chain()
    plain = UtilizationCallbackHandler(sample_rate=0.0, max_evaluations_per_second=0)
    ruled = UtilizationCallbackHandler(sample_rate=0.0, max_evaluations_per_second=0, selection_rules=RULES)
    same = {"tags": ["t"], "metadata": {"k": "v"}}  # every row carries the same tags and metadata
    configs: dict[str, Any] = {
        "baseline": dict(same),
        "no_rules": {"callbacks": [plain], **same},
        "rules_no_match": {"callbacks": [ruled], **same},
    }
    for config in configs.values():  # warm-up
        for _ in range(20):
            rag.invoke("q", config=config)
    means: dict[str, list[float]] = {name: [] for name in configs}
    order = list(configs)
    for r in range(args.rounds):
        for name in order[r % 3 :] + order[: r % 3]:  # rotate: no row always runs last
            config = configs[name]
            means[name].append(timed(lambda c=config: rag.invoke("q", config=c), args.iterations))
    ms = {name: statistics.median(values) * 1000 for name, values in means.items()}
    own = {name: ms[name] - ms["baseline"] for name in ("no_rules", "rules_no_match")}
    for name, value in ms.items():
        print(f"callback {name:15s} {value:8.3f} ms/invoke")
    print(f"callback handler cost with rules / without: {own['rules_no_match'] / own['no_rules']:.2f}")
    print(f"callback invoke with rules / without: {ms['rules_no_match'] / ms['no_rules']:.2f}")
    assert plain.stats().captured == ruled.stats().captured and ruled.stats().not_selected == 0

    fast = Evaluator(sample_rate=0.0, max_evaluations_per_second=0)
    slow = Evaluator(sample_rate=0.0, max_evaluations_per_second=0, selection_rules=RULES)
    facts = SelectionFacts(root_name="rag", tags=["t"], metadata={"k": "v"})
    ids = [random.getrandbits(128) for _ in range(1000)]
    n = args.iterations * 50
    ns: dict[str, list[float]] = {"admit": [], "admit_rules": []}
    for _ in range(args.rounds):  # medians of interleaved rounds
        ns["admit"].append(timed(lambda: fast.admit(ids[n % 1000]), n) * 1e9)
        ns["admit_rules"].append(timed(lambda: slow.admit(ids[n % 1000], facts), n) * 1e9)
    a, b = statistics.median(ns["admit"]), statistics.median(ns["admit_rules"])
    print(f"admit without rules {a:8.0f} ns; with 3 rules matching nothing {b:8.0f} ns; ratio {b / a:.2f}")
    for closable in (plain, ruled, fast, slow):
        closable.shutdown(5_000)


if __name__ == "__main__":
    main()
