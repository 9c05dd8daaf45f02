"""Cost of selection rules for an interaction no rule selects, and of dimensions on the capture path
(issue 12, "Speed").

Measurements, each interleaved (A B A B ...) in one run so that machine load hits both alike:

* ``callback``: an LCEL RAG chain (real LangChain runnables, a fake chat model replaying text) invoked with
  ``UtilizationCallbackHandler`` at ``sample_rate`` 0 (every interaction unselected), without rules vs with
  three rules that match nothing (``root_name``, ``tags``, ``metadata``); a chain without a handler is the
  baseline. Reported: mean milliseconds per invocation, and the ratio of the handler's own cost (the time
  above the baseline) with rules to without.
* ``admit``: ``Evaluator.admit(trace_id)`` (the fast path) vs ``Evaluator.admit(trace_id, facts)`` with the
  three rules, nanoseconds per call.
* ``dimensions``: the same chain, every interaction SAMPLED and captured (query, answer, documents and
  dimensions read at the root's end, then submitted: the worker is held to a tiny CPU budget with a
  one-slot queue, so the queue is full and the submissions are dropped ``queue_full`` after capture did
  all its work), without ``metric_dimensions`` vs with two keys (``prompt_version``, ``tenant``) present
  in the run's metadata; the model, provider, chain and retriever dimensions are read in both. Reported:
  ms per invocation, the ratio of the handler's own cost with keys to without, and the nanoseconds of
  reading one interaction's dimensions (``_extract.dimensions_of``, without / with the keys).
* ``span``: converting one closed span turn (``spans._convert.to_interaction``: sender, response id and
  dimensions read from the buffered spans, once per turn) without / with the two keys, nanoseconds.

    python benchmarks/bench_selection.py [--iterations 400] [--rounds 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnablePassthrough

from ctxutil_otel import ContextualUtilization, LexicalJudge
from ctxutil_otel.capture import UtilizationCallbackHandler
from ctxutil_otel.capture._extract import dimensions_of
from ctxutil_otel.capture._runs import RootRun
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


class ChatBench(FakeListChatModel):
    """A chat model with a model name: LangChain sets ``ls_model_name`` / ``ls_provider`` for it."""

    model: str = "bench-model"


def chain() -> Runnable[Any, str]:
    prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
    model = ChatBench(responses=["an answer"])
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
    bench_dimensions(rag, args.iterations, args.rounds)


def _captured(keys: tuple[str, ...]) -> UtilizationCallbackHandler:
    """A handler that captures every interaction; its worker barely runs (see the module docstring)."""
    evaluator = Evaluator(
        ContextualUtilization(judge=LexicalJudge()),
        sample_rate=1.0,
        max_evaluations_per_second=0,
        max_queue_size=1,
        max_worker_cpu_fraction=0.0001,
        metric_dimensions=keys,
    )
    return UtilizationCallbackHandler(evaluator)


def bench_dimensions(rag: Runnable[Any, str], iterations: int, rounds: int) -> None:
    keys = ("prompt_version", "tenant")
    without, with_keys = _captured(()), _captured(keys)
    meta = {"metadata": {"prompt_version": "v3", "tenant": "acme", "k": "v"}, "run_name": "rag"}
    configs: dict[str, Any] = {
        "baseline": dict(meta),
        "dims_builtin": {"callbacks": [without], **meta},
        "dims_with_keys": {"callbacks": [with_keys], **meta},
    }
    for config in configs.values():  # warm-up
        for _ in range(20):
            rag.invoke("q", config=config)
    means: dict[str, list[float]] = {name: [] for name in configs}
    order = list(configs)
    for r in range(rounds):
        for name in order[r % 3 :] + order[: r % 3]:
            config = configs[name]
            means[name].append(timed(lambda c=config: rag.invoke("q", config=c), iterations))
    ms = {name: statistics.median(values) * 1000 for name, values in means.items()}
    own = {name: ms[name] - ms["baseline"] for name in ("dims_builtin", "dims_with_keys")}
    for name, value in ms.items():
        print(f"captured {name:15s} {value:8.3f} ms/invoke")
    ratio = own["dims_with_keys"] / own["dims_builtin"]
    print(f"captured handler cost with 2 metadata keys / without: {ratio:.2f}")
    print(f"captured invoke with 2 metadata keys / without: {ms['dims_with_keys'] / ms['dims_builtin']:.2f}")
    for handler in (without, with_keys):
        stats = handler.stats()
        assert stats.captured > 0 and stats.sampled_out == 0, stats

    root = RootRun(
        run_id=uuid.uuid4(),
        trace_id=1,
        parent=None,
        start_time_ns=0,
        started_at=0.0,
        inputs="q",
        serialized={"name": "RunnableSequence"},
        start_kwargs={"name": "rag", "metadata": meta["metadata"]},
        retriever_name="Retriever",
        llm_start={"metadata": {"ls_model_name": "bench-model", "ls_provider": "bench"}},
    )
    n = iterations * 50
    ns: dict[str, list[float]] = {"none": [], "keys": []}
    for _ in range(rounds):
        ns["none"].append(timed(lambda: dimensions_of(root, ()), n) * 1e9)
        ns["keys"].append(timed(lambda: dimensions_of(root, keys), n) * 1e9)
    a, b = statistics.median(ns["none"]), statistics.median(ns["keys"])
    print(f"dimensions_of per interaction: built-in only {a:6.0f} ns; with 2 metadata keys {b:6.0f} ns")
    for handler in (without, with_keys):
        handler.shutdown(5_000)
    bench_span_turn(keys, iterations, rounds)


def bench_span_turn(keys: tuple[str, ...], iterations: int, rounds: int) -> None:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ctxutil_otel.capture.spans._assembly import BufferedPart, Turn
    from ctxutil_otel.capture.spans._convert import to_interaction
    from ctxutil_otel.capture.spans._model import Chunk, Generation, Retrieval

    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    with tracer.start_as_current_span("chain", attributes={"prompt_version": "v3", "tenant": "acme"}):
        with tracer.start_as_current_span("retriever"):
            pass
        with tracer.start_as_current_span(
            "chat", attributes={"gen_ai.request.model": "m", "gen_ai.provider.name": "p"}
        ):
            pass
    retriever, chat, chain_span = memory.get_finished_spans()
    chunks = tuple(Chunk(f"chunk {i}") for i in range(4))
    retrieval = BufferedPart(Retrieval("q", chunks, "genai"), retriever.context, 1, 2, 0, retriever)
    generation = BufferedPart(Generation("an answer", "genai"), chat.context, 3, 4, 0, chat)
    turn = Turn(chat.context.trace_id, (retrieval,), generation, 0, 5)
    n = iterations * 50
    ns: dict[str, list[float]] = {"none": [], "keys": []}
    for _ in range(rounds):
        ns["none"].append(timed(lambda: to_interaction(turn, chain_span, ()), n) * 1e9)
        ns["keys"].append(timed(lambda: to_interaction(turn, chain_span, keys), n) * 1e9)
    a, b = statistics.median(ns["none"]), statistics.median(ns["keys"])
    print(f"span turn to_interaction: built-in dimensions {a:6.0f} ns; with 2 metadata keys {b:6.0f} ns")
    provider.shutdown()


if __name__ == "__main__":
    main()
