"""Replaying parts for a RAG chain over recorded interactions (the demo and the examples).

:class:`RecordedRetriever` returns each question's recorded chunks and :class:`ReplayChatModel` answers
each question with its recorded answer. Both are real LangChain components (a ``BaseRetriever`` and a
``BaseChatModel``), so a chain built from them emits exactly the callbacks a production chain does.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.retrievers import BaseRetriever
from pydantic import field_validator

__all__ = ["QUESTION_MARKER", "RecordedRetriever", "ReplayChatModel", "normalise_question"]

#: The prompt line that carries the question; :class:`ReplayChatModel` reads the question after it.
QUESTION_MARKER = "Question: "


def normalise_question(text: str) -> str:
    """Collapse runs of whitespace to one space and trim: how recorded and prompted questions compare."""
    return " ".join(text.split())


class RecordedRetriever(BaseRetriever):
    """Returns the recorded chunks of a question as ``Document`` objects (``metadata["index"]`` = position).

    ``recorded`` maps question text to its chunk texts; an unknown question retrieves nothing.
    """

    recorded: Mapping[str, Sequence[str]]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return [
            Document(page_content=text, metadata={"index": i})
            for i, text in enumerate(self.recorded.get(query, ()))
        ]


class ReplayChatModel(BaseChatModel):
    """Answers with the recorded answer of the question found in the last message.

    The question is the text after the last :data:`QUESTION_MARKER` (to the end of the message), compared
    with the recorded questions after :func:`normalise_question` (recorded questions may carry leading
    spaces or line breaks). An unknown question gets ``default_answer``. Streams word by word, like a
    real model.
    """

    answers: Mapping[str, str]
    default_answer: str = "I don't know."

    @field_validator("answers")
    @classmethod
    def _normalise_keys(cls, answers: Mapping[str, str]) -> dict[str, str]:
        return {normalise_question(question): answer for question, answer in answers.items()}

    @property
    def _llm_type(self) -> str:
        return "replay-chat-model"

    def _answer(self, messages: list[BaseMessage]) -> str:
        text = str(messages[-1].text) if messages else ""
        if QUESTION_MARKER not in text:
            return self.default_answer
        question = normalise_question(text.rsplit(QUESTION_MARKER, 1)[1])
        return self.answers.get(question, self.default_answer)  # keys normalised at construction

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self._answer(messages)))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        words = self._answer(messages).split(" ")
        for i, word in enumerate(words):
            token = word if i == 0 else " " + word
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager is not None:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
