"""The same RAG chain driven with `ainvoke` and `astream`: the handler assembles streamed answers.

    .venv/bin/pip install ".[examples]"   # from the repository root
    python examples/langchain_async_stream.py [N_QUESTIONS]

Offline (replaying model); see examples/langchain_callback.py for swapping in a real model.
"""

from __future__ import annotations

import asyncio
import sys

from langchain_core.vectorstores import InMemoryVectorStore

from ctxutil_otel import UtilizationCallbackHandler, configure_telemetry
from ctxutil_otel.data import load_sample
from ctxutil_otel.demo import HashingEmbeddings, build_rag_chain, replay_parts


async def run(n_questions: int) -> None:
    telemetry = configure_telemetry(set_global=True, console_format="compact")
    rows = load_sample(limit=n_questions)
    store = InMemoryVectorStore(embedding=HashingEmbeddings())
    store.add_texts([chunk for row in rows for chunk in row["retrieved_content"]])
    _, model = replay_parts(rows)
    chain = build_rag_chain(store.as_retriever(search_kwargs={"k": 4}), model)
    # Attach once with with_config: every call of `traced` reports to the handler.
    handler = UtilizationCallbackHandler(max_evaluations_per_second=0)
    traced = chain.with_config(callbacks=[handler])

    half = len(rows) // 2
    answers = await asyncio.gather(*(traced.ainvoke(row["query"]) for row in rows[:half]))
    for row, answer in zip(rows[:half], answers, strict=True):
        print(f"ainvoke  Q: {row['query'][:60]}\n         A: {answer[:60]}")
    for row in rows[half:]:
        tokens = [token async for token in traced.astream(row["query"])]
        print(f"astream  Q: {row['query'][:60]}\n         A: {''.join(tokens)[:60]} ({len(tokens)} tokens)")

    # force_flush blocks (it waits for the worker thread): keep it off the event loop.
    await asyncio.to_thread(handler.force_flush, 30_000)
    print(handler.stats())
    handler.shutdown(5_000)
    telemetry.shutdown()


if __name__ == "__main__":
    asyncio.run(run(int(sys.argv[1]) if len(sys.argv) > 1 else 4))
