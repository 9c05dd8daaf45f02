"""Tool results as retrieved context, for the LangChain callback (docs/capture.md, section 6).

An agent's tool that searches without a LangChain retriever (a vector store's ``similarity_search``, a REST
search API, a SQL lookup) hands its result to the model as a ``ToolMessage``. What counts is what reached
the **answering** generation's prompt: the ``ToolMessage`` s among the input messages of the last answer
model run under the root (this turn's tool calls, and earlier turns' still in a checkpointed
conversation). A tool result the answering model never saw is not judged.

Which tool messages count (:class:`ToolRules`), in this order:

* a tool call whose run held a LangChain retriever run is skipped: that retriever's documents are already
  the chunks (``create_retriever_tool``), never counted twice;
* a failed tool call (``status="error"``) and an excluded name (``excluded_tools``) never count;
* with ``retrieval_tools`` set, exactly the tools it names count;
* otherwise a tool message counts when its ``artifact`` holds ``Document`` s (a ``content_and_artifact``
  tool), its content is a list of strings, or the tool's name or description uses a retrieval word
  (:data:`NAME_WORDS`, :data:`DESCRIPTION_WORDS`). A calculator's or a clock's result is not retrieved
  context.

How a counted message becomes chunks (:func:`chunks_of`): the artifact's ``Document`` s, each a chunk (id
and metadata kept); else each string (or text block) of a list content; else a string content that is a
JSON array of strings or of objects with ``page_content``/``content``/``text``, each item a chunk; else the
whole text, one chunk. A chunk that is not a ``Document`` is a mapping ``{"text", "id", "metadata":
{"source": "tool:<name>"}}`` (the tool call id as its id).

A root that never retrieved is first only asked whether a tool message counts (:func:`prompt_counts_tools`:
no chunk made, the content read only when the name, description and artifact cannot tell); its chunks are
made (:func:`prompt_tool_chunks`) only for a root that will be evaluated (in the sample, its answer ended).
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from .._item import document_sequence, is_document, mapping_text

__all__ = [
    "DESCRIPTION_WORDS",
    "NAME_WORDS",
    "ToolRules",
    "chunks_of",
    "content_texts",
    "prompt_counts_tools",
    "prompt_tool_chunks",
    "tool_messages",
]

#: Words of a tool's name (split at ``_``, ``-``, ``.``, spaces and camelCase) that make it a retrieval
#: tool; a word counts when it starts with one of these.
NAME_WORDS = (
    "search",
    "retriev",
    "lookup",
    "find",
    "fetch",
    "query",
    "knowledge",
    "kb",
    "doc",
    "wiki",
    "rag",
    "vector",
    "faq",
    "manual",
    "arxiv",
    "pubmed",
    "tavily",
    "sql",
    "database",
    "similar",
)
#: Phrases of a tool's description that make it a retrieval tool (whole words, any case).
DESCRIPTION_WORDS = re.compile(
    r"\b(search\w*|retriev\w*|look(?:s|ing)? ?up|knowledge base|documents?|documentation|vector ?store|"
    r"database|wiki\w*|passages?)\b",
    re.IGNORECASE,
)
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


@dataclass(frozen=True, slots=True)
class ToolRules:
    """Which tools' results count: ``retrieval_tools`` (globs; when given, only these) and
    ``excluded_tools`` (globs; never these), as the settings of the same names."""

    retrieval_tools: tuple[str, ...] = ()
    excluded_tools: tuple[str, ...] = ()

    def counts(self, message: object, name: str | None, description: str | None, listed: bool) -> bool:
        """Whether ``message`` (a ``ToolMessage`` of tool ``name``) is retrieved context; ``listed``: its
        content is a list of texts (a list, or a JSON array: ``ToolNode`` sends a list as JSON)."""
        decided = self.decided(message, name, description)
        return listed if decided is None else decided

    def decided(self, message: object, name: str | None, description: str | None) -> bool | None:
        """:meth:`counts` read from the message's status and artifact and the tool's name and description
        alone; ``None`` when only its content can tell (it counts when that is a list of texts)."""
        if getattr(message, "status", "success") == "error":
            return False
        tool = name or ""
        if any(fnmatch.fnmatchcase(tool, glob) for glob in self.excluded_tools):
            return False
        if self.retrieval_tools:
            return any(fnmatch.fnmatchcase(tool, glob) for glob in self.retrieval_tools)
        if (
            _documents(getattr(message, "artifact", None)) is not None
            or _retrieval_name(tool)
            or (isinstance(description, str) and DESCRIPTION_WORDS.search(description) is not None)
        ):
            return True
        return None


def tool_messages(prompt: object) -> list[tuple[object, str | None]]:
    """The ``ToolMessage`` s among a chat model run's input messages (``on_chat_model_start``'s
    ``messages``: one list per prompt), in prompt order, each with its tool's name: the message's
    ``name``, else its ``additional_kwargs["name"]`` (LangChain's ``AgentExecutor`` puts it there), else the
    name of the tool call it answers in an earlier AI message of the prompt."""
    if not isinstance(prompt, Sequence):
        return []
    found: list[tuple[object, str | None]] = []
    called: dict[object, object] = {}  # tool call id -> tool name, from the AI messages' tool_calls
    for messages in prompt:
        if not isinstance(messages, Sequence) or isinstance(messages, str):
            continue
        for message in messages:
            kind = getattr(message, "type", None)
            if kind == "ai":
                for call in getattr(message, "tool_calls", None) or ():
                    if isinstance(call, Mapping):
                        called[call.get("id")] = call.get("name")
            elif kind == "tool":
                found.append((message, _tool_name(message, called)))
    return found


def _tool_name(message: object, called: Mapping[object, object]) -> str | None:
    name = getattr(message, "name", None)
    if not isinstance(name, str) or not name:
        extra = getattr(message, "additional_kwargs", None)
        name = extra.get("name") if isinstance(extra, Mapping) else None
    if not isinstance(name, str) or not name:
        name = called.get(getattr(message, "tool_call_id", None))
    return name if isinstance(name, str) and name else None


def content_texts(content: object) -> tuple[list[str], bool]:
    """A tool message content's texts, and whether it was a list of them: a list of strings or text
    blocks, or a string holding a JSON array of strings or of objects with a text key (one text each);
    else the whole string (one text, ``False``)."""
    texts = _strings(content)
    if texts is not None:
        return texts, True
    if isinstance(content, str):
        items = _json_items(content)
        if items is not None:
            return items, True
        return ([content] if content.strip() else []), False
    return [], False


def chunks_of(message: object, name: str | None, texts: Sequence[str]) -> list[object]:
    """The chunks of one counted ``ToolMessage`` (module docstring): its artifact's ``Document`` s, else
    a text mapping per text of :func:`content_texts`."""
    documents = _documents(getattr(message, "artifact", None))
    if documents is not None:
        return documents
    call_id = getattr(message, "tool_call_id", None)
    source = {"source": f"tool:{name}"} if name else {}
    single = len(texts) == 1
    return [
        {"text": text, "id": call_id if single else f"{call_id}#{i}", "metadata": source}
        if isinstance(call_id, str)
        else {"text": text, "metadata": source}
        for i, text in enumerate(texts)
        if text.strip()
    ]


@functools.lru_cache(maxsize=512)  # an application has few tools: each name is split once
def _retrieval_name(name: str) -> bool:
    words = (word.lower() for word in _WORD_SPLIT.split(name) if word)
    return any(word.startswith(NAME_WORDS) for word in words)


def _documents(artifact: object) -> list[object] | None:
    """The ``Document`` s an artifact holds (one, or a non-empty list of only them), else ``None``."""
    return [artifact] if is_document(artifact) else document_sequence(artifact)


def _strings(content: object) -> list[str] | None:
    """A list content's strings (``str`` items and text blocks), when every item is one; else ``None``."""
    if not isinstance(content, Sequence) or isinstance(content, (str, bytes)) or not content:
        return None
    texts: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif (
            isinstance(block, Mapping) and block.get("type") == "text" and isinstance(block.get("text"), str)
        ):
            texts.append(block["text"])
        else:
            return None
    return texts


def _json_items(content: str) -> list[str] | None:
    """The items of a JSON array of strings or of objects with a text key, else ``None``."""
    stripped = content.strip()
    if not (stripped.startswith("[") and stripped.endswith("]")):
        return None
    try:
        items = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(items, list):
        return None  # ``[]`` is an empty result (``ToolNode`` sends a tool's empty list so), not a text
    texts = [_item_text(item) for item in items]
    return None if any(text is None for text in texts) else [t for t in texts if t is not None]


def _item_text(item: object) -> str | None:
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping):
        return mapping_text(item)
    return None


def prompt_tool_chunks(
    prompt: object,
    rules: ToolRules,
    calls: Mapping[str, tuple[str | None, str | None, bool]],
) -> tuple[list[object] | None, set[str]]:
    """The chunks of the counted tool messages of ``prompt`` (the answering run's input messages), in
    prompt order (``[]`` when counted messages were all empty, an empty retrieval; ``None`` when none
    counted), and the tool call ids the prompt holds (whatever their count).

    ``calls``: this root's tool calls, ``tool_call_id`` -> (name, description, held a retriever run).
    A message of a call that held a retriever run gives no chunk (its retriever's documents are counted);
    so does a message of no known call whose tool is the name of such a call (LangChain gave the runs no
    call id: ``AgentExecutor``).
    """
    chunks: list[object] = []
    counted = False
    seen: set[str] = set()
    for message, name, description in _candidates(prompt, calls, seen):
        texts, listed = content_texts(getattr(message, "content", None))
        if rules.counts(message, name, description, listed):
            counted = True
            chunks.extend(chunks_of(message, name, texts))
    return (chunks if counted else None), seen


def prompt_counts_tools(
    prompt: object,
    rules: ToolRules,
    calls: Mapping[str, tuple[str | None, str | None, bool]],
) -> bool:
    """Whether :func:`prompt_tool_chunks` would find a counted tool message (chunks not ``None``), without
    making any chunk: a message's content is read only when :meth:`ToolRules.decided` cannot tell, and the
    first counted message ends the search. The request path's question for a root outside the sample."""
    for message, name, description in _candidates(prompt, calls, set()):
        decided = rules.decided(message, name, description)
        if decided is None:
            decided = _listed(getattr(message, "content", None))
        if decided:
            return True
    return False


def _candidates(
    prompt: object, calls: Mapping[str, tuple[str | None, str | None, bool]], seen: set[str]
) -> Iterator[tuple[object, str | None, str | None]]:
    """The tool messages of ``prompt`` that may count, in prompt order, each with its tool's name and
    description (those of its call in ``calls`` first); the ones of a call that held a retriever run are
    skipped (:func:`prompt_tool_chunks`). Adds every tool call id the prompt holds to ``seen``."""
    retrieving = {name for name, _, held in calls.values() if held and name}
    for message, found in tool_messages(prompt):
        name: object = found
        call_id = getattr(message, "tool_call_id", None)
        description: str | None = None
        if isinstance(call_id, str):
            seen.add(call_id)
            call = calls.get(call_id)
            if call is not None:
                name = call[0] or name
                description = call[1]
                if call[2]:
                    continue
            elif name in retrieving:
                continue
        yield message, (name if isinstance(name, str) else None), description


def _listed(content: object) -> bool:
    """Whether ``content`` is a list of texts (:func:`content_texts`' second value), building no list
    when it is not a bracketed string or a list."""
    if isinstance(content, str):
        stripped = content.strip()
        if not (stripped.startswith("[") and stripped.endswith("]")):
            return False
    return content_texts(content)[1]
