"""Attach UtilizationCallbackHandler to an LCEL RAG chain over an InMemoryVectorStore.

Runs offline: the vector store holds the bundled RAGBench passages (embedded with a hashing bag-of-words
embedding) and the chat model replays each question's recorded answer. Set OPENAI_API_KEY (and
optionally OPENAI_BASE_URL / EXAMPLE_CHAT_MODEL) with `langchain-openai` installed to answer with a real
OpenAI-compatible model instead.

    .venv/bin/pip install ".[examples]"   # from the repository root: numpy, for InMemoryVectorStore
    python examples/langchain_callback.py [N_QUESTIONS]

Telemetry goes to the global OpenTelemetry providers; this example sets console exporters (compact
lines) unless OTEL_EXPORTER_OTLP_ENDPOINT is set, in which case it exports over OTLP.
"""

from __future__ import annotations

import os
import sys

from langchain_core.language_models import BaseChatModel
from langchain_core.vectorstores import InMemoryVectorStore

from ctxutil_otel import UtilizationCallbackHandler, configure_telemetry
from ctxutil_otel.data import load_sample
from ctxutil_otel.demo import HashingEmbeddings, build_rag_chain, replay_parts


def chat_model(rows: list[dict[str, object]]) -> BaseChatModel:
    """A real OpenAI-compatible model when configured, else the replaying model (offline)."""
    if os.environ.get("OPENAI_API_KEY"):
        try:
            from langchain_openai import ChatOpenAI  # optional: pip install langchain-openai
        except ImportError:
            print("langchain-openai is not installed: using the replaying model", file=sys.stderr)
        else:
            return ChatOpenAI(model=os.environ.get("EXAMPLE_CHAT_MODEL", "gpt-4o-mini"), temperature=0)
    return replay_parts(rows)[1]  # type: ignore[arg-type]


def main(n_questions: int = 5) -> int:
    # 1. OpenTelemetry providers, installed as the globals (your application may already have its own).
    telemetry = configure_telemetry(set_global=True, console_format="compact")

    # 2. A RAG chain: InMemoryVectorStore retriever | prompt | chat model | parser.
    rows = load_sample(limit=n_questions)
    store = InMemoryVectorStore(embedding=HashingEmbeddings())
    store.add_texts([chunk for row in rows for chunk in row["retrieved_content"]])
    chain = build_rag_chain(store.as_retriever(search_kwargs={"k": 4}), chat_model(rows))  # type: ignore[arg-type]

    # 3. One handler for the whole application; settings from arguments > CTXUTIL_* env > defaults.
    handler = UtilizationCallbackHandler(sample_rate=1.0, max_evaluations_per_second=0)
    for row in rows:
        answer = chain.invoke(row["query"], config={"callbacks": [handler]})
        print(f"Q: {row['query'][:70]}\nA: {answer[:70]}\n")

    # 4. At shutdown: finish pending evaluations, then flush telemetry.
    handler.force_flush(timeout_millis=30_000)
    print(handler.stats())
    handler.shutdown(timeout_millis=5_000)
    telemetry.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
