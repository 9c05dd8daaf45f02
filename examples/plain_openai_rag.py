"""A RAG application without a framework: its own search, the OpenAI SDK, one `record_interaction` call.

The application retrieves passages itself (here a word-overlap search over the bundled RAGBench passages,
standing in for a vector store's query), asks an OpenAI-compatible chat model with them, and hands the
finished interaction to the evaluator, inside its own request span: the evaluation lands in that trace.

    OPENAI_BASE_URL=http://127.0.0.1:8000/v1 OPENAI_API_KEY=... python examples/plain_openai_rag.py [N]

(`EXAMPLE_CHAT_MODEL` picks the model, default gpt-4o-mini.) Telemetry: console exporters (compact lines)
unless OTEL_EXPORTER_OTLP_ENDPOINT is set. Page: docs/no-framework.md.
"""

from __future__ import annotations

import os
import sys

from openai import OpenAI

from ctxutil_otel import Evaluator, configure_telemetry
from ctxutil_otel.data import load_sample


def search(passages: list[str], query: str, k: int = 3) -> list[dict[str, object]]:
    """The application's own retrieval: the k passages sharing most words with the query, as mappings
    with text, id and metadata (what a vector store's client returns, more or less)."""
    words = set(query.lower().split())
    ranked = sorted(range(len(passages)), key=lambda i: -len(words & set(passages[i].lower().split())))
    return [{"text": passages[i], "id": f"passage-{i}", "metadata": {"source": "sample"}} for i in ranked[:k]]


def main(n_questions: int = 3) -> int:
    telemetry = configure_telemetry(set_global=True, console_format="compact")
    tracer = telemetry.tracer_provider.get_tracer("plain-rag-app")
    evaluator = Evaluator(sample_rate=1.0, max_evaluations_per_second=0)  # settings as everywhere
    client = OpenAI()  # OPENAI_BASE_URL / OPENAI_API_KEY from the environment
    model = os.environ.get("EXAMPLE_CHAT_MODEL", "gpt-4o-mini")

    rows = load_sample(limit=n_questions)
    passages = [chunk for row in rows for chunk in row["retrieved_content"]]
    for row in rows:
        question = str(row["query"])
        with tracer.start_as_current_span("rag.request"):
            chunks = search(passages, question)
            context = "\n\n".join(str(c["text"]) for c in chunks)
            reply = client.chat.completions.create(
                model=model,
                messages=[
                    {"role": "system", "content": f"Answer from the context.\n\nContext:\n{context}"},
                    {"role": "user", "content": question},
                ],
            )
            answer = reply.choices[0].message.content or ""
            # The one addition: never raises, never blocks; evaluated in this span's trace.
            evaluator.record_interaction(
                query=question,
                retrieved_content=chunks,
                actual_output=answer,
                model=model,
                provider="openai",
                retriever_name="word_overlap",
            )
        print(f"Q: {question[:70]}\nA: {answer[:70]}\n")

    evaluator.force_flush(30_000)
    print(evaluator.stats())
    evaluator.shutdown(5_000)
    telemetry.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3))
