"""A small real LangChain RAG application with no ctxutil-otel code in it, for ``opentelemetry-instrument``.

LCEL chain ``{"context": retriever, "question": passthrough} | prompt | chat model | parser`` over a real
``BaseRetriever`` returning ``Document`` s (with ``id`` and ``metadata["source"]``) and LangChain's
``FakeListChatModel`` (a real ``BaseChatModel`` replaying text; no LLM can run offline). It invokes the chain
once per question given on the command line and prints one JSON line with the answers. Nothing else: the
evaluation is turned on by the launcher and the ``CTXUTIL_*`` environment alone.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnablePassthrough

CHUNKS = (
    ("doc-catechins", "handbook.pdf", "Green tea contains antioxidants called catechins."),
    ("doc-inflammation", "review.html", "The antioxidants in green tea reduce inflammation."),
    ("doc-metabolism", "blog.md", "Green tea may boost metabolism."),
    ("doc-history", "history.txt", "Tea originated in China thousands of years ago."),
)
ANSWER = "Green tea contains antioxidants called catechins, and these antioxidants reduce inflammation."


class TeaRetriever(BaseRetriever):
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return [
            Document(page_content=text, id=doc_id, metadata={"source": src}) for doc_id, src, text in CHUNKS
        ]


def main() -> int:
    prompt = ChatPromptTemplate.from_template(
        "Answer from the context.\nContext: {context}\nQuestion: {question}"
    )
    questions = sys.argv[1:]
    chain = (
        {"context": TeaRetriever(), "question": RunnablePassthrough()}
        | prompt
        | FakeListChatModel(responses=[ANSWER] * len(questions))
        | StrOutputParser()
    )
    answers = [chain.invoke(question) for question in questions]
    print(json.dumps({"answers": answers}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
