"""Tool results are retrieved context (issue 23 item 1; docs/capture.md, section 6).

An agent whose tool searches without a LangChain retriever (a vector store's ``similarity_search``, a REST
search, a SQL lookup) returns text: before, nothing was captured, nothing counted, no warning (every agent
test here but the retriever-tool one and the never-seen one failed with ``captured == 0``). Now the tool
messages that reached the answering generation's prompt are its chunks, under rules that leave a
calculator out.

Real parts: LangGraph's prebuilt ReAct agent and a ``StateGraph`` with ``ToolNode`` (langgraph 1.2),
LangChain's ``AgentExecutor`` with a tool-calling agent (langchain-classic 1.0), a checkpointer
(``InMemorySaver``), LangChain tools (``@tool``, ``content_and_artifact``, ``create_retriever_tool``), the
real callback handler and Evaluator with the lexical judge behind a recorder. The chat model is LangChain's
``GenericFakeChatModel`` replaying scripted ``AIMessage`` s with tool calls (its ``bind_tools`` returns
itself: it emits the calls it is given), or a small scripted ``BaseChatModel`` for ``AgentExecutor``.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import create_retriever_tool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from .conftest import CHUNKS, QUESTION, FixedRetriever, Rig, assert_accounted

with warnings.catch_warnings():  # create_react_agent moved to langchain.agents (not installed here)
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

SEARCH_TEXT = "Green tea contains antioxidants called catechins. The antioxidants reduce inflammation."
ANSWER = "Green tea contains antioxidants called catechins, which reduce inflammation; 2 x 3 = 6."


class ToolCallingFake(GenericFakeChatModel):
    """``GenericFakeChatModel`` that accepts tools (an agent binds them) and replays its messages."""

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ToolCallingFake:  # type: ignore[override]
        return self


def model(*turns: AIMessage) -> ToolCallingFake:
    return ToolCallingFake(messages=iter(turns))


def calls(*named: tuple[str, dict[str, Any]]) -> AIMessage:
    """An AI message calling the tools ``named`` (in parallel), ids ``call-0``, ``call-1``, ..."""
    return AIMessage(
        "", tool_calls=[{"name": n, "args": a, "id": f"call-{i}"} for i, (n, a) in enumerate(named)]
    )


@tool
def search_docs(query: str) -> str:
    """Search the product documentation (a vector store's similarity_search, joined)."""
    return SEARCH_TEXT


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


@tool
def get_notes(topic: str) -> list[str]:
    """Return the notes on a topic."""
    return list(CHUNKS[:2])


@tool(response_format="content_and_artifact")
def policy(topic: str) -> tuple[str, list[Document]]:
    """Return the policy for a topic."""
    docs = [Document(page_content=CHUNKS[2], id="doc-metabolism", metadata={"source": "policy.pdf"})]
    return CHUNKS[2], docs


def judged(rig: Rig) -> list[list[str]]:
    """The chunks of each evaluation, in order."""
    rig.flush()
    return [chunks for _, _, chunks in rig.judge.calls]


def ask(question: str = QUESTION) -> dict[str, Any]:
    return {"messages": [("user", question)]}


def test_react_agent_tool_text_is_a_chunk_and_a_calculator_result_is_not(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    agent = create_react_agent(
        model(
            calls(("search_docs", {"query": "green tea"}), ("multiply", {"a": 2, "b": 3})), AIMessage(ANSWER)
        ),
        [search_docs, multiply],
    )
    agent.invoke(ask(), config={"callbacks": [rig.handler]})
    interaction, result = rig.only()
    assert judged(rig) == [[SEARCH_TEXT]]  # the parallel calculator call is not retrieved context
    assert interaction.query == QUESTION and interaction.answer == ANSWER
    assert interaction.documents == [
        {"text": SEARCH_TEXT, "id": "call-0", "metadata": {"source": "tool:search_docs"}}
    ]
    assert result.signals.total_chunks == 1
    assert_accounted(rig)


def test_state_graph_tool_node_lists_of_strings_and_artifacts_over_two_rounds(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    llm = model(
        calls(("get_notes", {"topic": "tea"})),
        calls(("policy", {"topic": "tea"}), ("multiply", {"a": 2, "b": 3})),
        AIMessage(ANSWER),
    )

    def agent(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([get_notes, policy, multiply]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    graph.compile().invoke(ask(), config={"callbacks": [rig.handler]})
    interaction, _ = rig.only()
    # Each string of a list result is a chunk; an artifact's Documents are the chunks (id and metadata kept).
    assert judged(rig) == [[CHUNKS[0], CHUNKS[1], CHUNKS[2]]]
    assert [getattr(d, "id", None) or d["id"] for d in interaction.documents] == [  # type: ignore[index]
        "call-0#0",
        "call-0#1",
        "doc-metabolism",
    ]
    assert_accounted(rig)


def test_a_later_turn_is_judged_on_the_earlier_results_still_in_its_prompt(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    agent = create_react_agent(
        model(
            calls(("search_docs", {"query": "green tea"})),
            AIMessage(ANSWER),
            AIMessage("Catechins, as said."),
        ),
        [search_docs],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"callbacks": [rig.handler], "configurable": {"thread_id": "t1"}}
    agent.invoke(ask(), config=config)
    agent.invoke(ask("Which antioxidants again?"), config=config)  # no new tool call
    assert judged(rig) == [[SEARCH_TEXT], [SEARCH_TEXT]]
    assert [i.query for i in rig.interactions()] == [QUESTION, "Which antioxidants again?"]
    assert_accounted(rig)


def test_a_tool_result_the_answering_model_never_saw_is_not_judged(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    tools = ToolNode([search_docs])

    def lookup(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [calls(("search_docs", {"query": "tea"}))]}

    def answer(state: MessagesState) -> dict[str, list[BaseMessage]]:
        question = [m for m in state["messages"] if isinstance(m, HumanMessage)]
        return {"messages": [model(AIMessage(ANSWER)).invoke(question)]}  # the tool result is left out

    graph = StateGraph(MessagesState)
    graph.add_node("lookup", lookup)
    graph.add_node("tools", tools)
    graph.add_node("answer", answer)
    graph.add_edge(START, "lookup")
    graph.add_edge("lookup", "tools")
    graph.add_edge("tools", "answer")
    graph.add_edge("answer", END)
    graph.compile().invoke(ask(), config={"callbacks": [rig.handler]})
    rig.flush()
    assert rig.judge.calls == []
    assert rig.handler.stats().captured == 0  # no retrieved context reached the answer: not a RAG turn
    assert_accounted(rig)


def test_a_retriever_tool_is_judged_on_its_documents_once(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    retriever_tool = create_retriever_tool(FixedRetriever(), "tea_facts", "Search tea facts.")
    agent = create_react_agent(
        model(calls(("tea_facts", {"query": "tea"})), AIMessage(ANSWER)), [retriever_tool]
    )
    agent.invoke(ask(), config={"callbacks": [rig.handler]})
    rig.only()
    assert judged(rig) == [list(CHUNKS)]  # the retriever's documents, not also the tool's joined text
    assert_accounted(rig)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"retrieval_tools": ("mult*",)}, [["6"]]),  # named: only these count
        ({"excluded_tools": ("search_docs",)}, []),  # excluded: nothing left to judge, not captured
    ],
)
def test_the_settings_name_retrieval_tools_and_exclude_others(
    make_rig: Callable[..., Rig], settings: dict[str, Any], expected: list[list[str]]
) -> None:
    rig = make_rig(**settings)
    agent = create_react_agent(
        model(calls(("search_docs", {"query": "tea"}), ("multiply", {"a": 2, "b": 3})), AIMessage(ANSWER)),
        [search_docs, multiply],
    )
    agent.invoke(ask(), config={"callbacks": [rig.handler]})
    assert judged(rig) == expected
    assert rig.handler.stats().captured == len(expected)
    assert_accounted(rig)


def test_the_variables_name_them_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxutil_otel import Settings

    monkeypatch.setenv("CTXUTIL_RETRIEVAL_TOOLS", "search_*, kb_lookup")
    monkeypatch.setenv("CTXUTIL_EXCLUDED_TOOLS", "calculator")
    settings = Settings()
    assert settings.retrieval_tools == ("search_*", "kb_lookup")
    assert settings.excluded_tools == ("calculator",)


def test_parallel_tool_calls_under_asyncio(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    agent = create_react_agent(
        model(calls(("search_docs", {"query": "a"}), ("get_notes", {"topic": "b"})), AIMessage(ANSWER)),
        [search_docs, get_notes],
    )

    async def turns() -> None:
        await asyncio.gather(*(agent.ainvoke(ask(), config={"callbacks": [rig.handler]}) for _ in range(1)))

    asyncio.run(turns())
    assert judged(rig) == [[SEARCH_TEXT, CHUNKS[0], CHUNKS[1]]]  # prompt order: the calls' order
    assert_accounted(rig)


def test_a_retriever_tool_whose_result_the_answer_never_saw_is_not_judged(
    make_rig: Callable[..., Rig],
) -> None:
    rig = make_rig()
    retriever_tool = create_retriever_tool(FixedRetriever(), "tea_facts", "Search tea facts.")

    def lookup(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [calls(("tea_facts", {"query": "tea"}))]}

    def answer(state: MessagesState) -> dict[str, list[BaseMessage]]:
        question = [m for m in state["messages"] if isinstance(m, HumanMessage)]
        return {"messages": [model(AIMessage(ANSWER)).invoke(question)]}

    graph = StateGraph(MessagesState)
    graph.add_node("lookup", lookup)
    graph.add_node("tools", ToolNode([retriever_tool]))
    graph.add_node("answer", answer)
    graph.add_edge(START, "lookup")
    graph.add_edge("lookup", "tools")
    graph.add_edge("tools", "answer")
    graph.add_edge("answer", END)
    graph.compile().invoke(ask(), config={"callbacks": [rig.handler]})
    rig.flush()
    assert rig.judge.calls == []  # its documents never reached the answering model
    stats = rig.handler.stats()
    assert stats.captured == 1 and stats.not_applicable == 1  # captured at its retrieval, no chunk left
    assert_accounted(rig)


class ScriptedToolCaller(BaseChatModel):
    """Calls ``calls`` while the last message is not a tool result, then answers ``ANSWER`` (no streaming
    chunks of its own: LangChain's ``AgentExecutor`` streams its model, which a replaying fake cannot do
    with a tool-call-only message)."""

    calls: list[dict[str, Any]]

    @property
    def _llm_type(self) -> str:
        return "scripted-tool-caller"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedToolCaller:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any) -> ChatResult:
        last_is_tool = messages[-1].type == "tool"
        message = AIMessage(ANSWER) if last_is_tool else AIMessage("", tool_calls=self.calls)
        return ChatResult(generations=[ChatGeneration(message=message)])


def _executor(tools: list[Any], *named: str) -> AgentExecutor:
    script = [
        {"name": name, "args": {"query": "tea"} if name != "multiply" else {"a": 2, "b": 3}, "id": f"c{i}"}
        for i, name in enumerate(named)
    ]
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer with the tools."), ("human", "{input}"), MessagesPlaceholder("agent_scratchpad")]
    )
    agent = create_tool_calling_agent(ScriptedToolCaller(calls=script), tools, prompt)
    return AgentExecutor(agent=agent, tools=tools)


def test_a_langchain_agent_executor_counts_its_search_tool_not_its_calculator(
    make_rig: Callable[..., Rig],
) -> None:
    # AgentExecutor runs its tools without a tool call id and names them only in additional_kwargs.
    rig = make_rig()
    _executor([search_docs, multiply], "search_docs", "multiply").invoke(
        {"input": QUESTION}, config={"callbacks": [rig.handler]}
    )
    interaction, _ = rig.only()
    assert judged(rig) == [[SEARCH_TEXT]]
    assert interaction.query == QUESTION and interaction.answer == ANSWER
    assert_accounted(rig)


def test_a_langchain_agent_executor_retriever_tool_is_judged_once(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    retriever_tool = create_retriever_tool(FixedRetriever(), "tea_facts", "Search tea facts.")
    _executor([retriever_tool], "tea_facts").invoke({"input": QUESTION}, config={"callbacks": [rig.handler]})
    rig.only()
    assert judged(rig) == [list(CHUNKS)]
    assert_accounted(rig)


@tool
def search_nothing(query: str) -> list[str]:
    """Search the product documentation; nothing matches."""
    return []


@tool
def search_blank(query: str) -> str:
    """Search the product documentation; nothing matches (an empty text)."""
    return ""


@pytest.mark.parametrize("empty_tool", [search_nothing, search_blank])
def test_a_counted_tool_with_an_empty_result_is_an_empty_retrieval(
    make_rig: Callable[..., Rig], empty_tool: Any
) -> None:
    """Like a retriever returning ``[]``: captured and counted ``not_applicable``, not ignored."""
    rig = make_rig()
    agent = create_react_agent(
        model(calls((empty_tool.name, {"query": "green tea"})), AIMessage(ANSWER)), [empty_tool]
    )
    agent.invoke(ask(), config={"callbacks": [rig.handler]})
    interaction, result = rig.only()
    assert interaction.documents == []
    assert result.label == "not_applicable"
    assert rig.handler.stats().not_applicable == 1
    assert_accounted(rig)


def test_an_empty_result_of_a_tool_that_does_not_count_is_not_captured(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    agent = create_react_agent(model(calls(("multiply", {"a": 0, "b": 0})), AIMessage(ANSWER)), [multiply])
    agent.invoke(ask(), config={"callbacks": [rig.handler]})
    rig.flush()
    assert rig.emitter.emitted == [] and rig.handler.stats().captured == 0


# --- request-path cost: an unsampled root's tool results are never parsed into chunks ------------------

#: A large tool result: 2,000 passages (ToolNode sends a list as a JSON array, ~190 kB of text).
MANY_PASSAGES = [f"Passage {i}: green tea contains catechins that reduce inflammation." for i in range(2000)]


@tool
def search_corpus(query: str) -> list[str]:
    """Search the whole corpus (a large result)."""
    return list(MANY_PASSAGES)


ARGS: dict[str, dict[str, Any]] = {
    "search_corpus": {"query": "tea"},
    "get_notes": {"topic": "tea"},
    "multiply": {"a": 2, "b": 3},
}


class ParserSpy:
    """Calls through to ``prompt_tool_chunks`` (the parser of tool messages into chunks) and counts the
    calls: a spy on a real function, not a mock; the agent, handler and evaluator are real."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from ctxutil_otel.capture import _root_accounting

        self.calls = 0
        self._real = _root_accounting.prompt_tool_chunks
        monkeypatch.setattr(_root_accounting, "prompt_tool_chunks", self)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self._real(*args, **kwargs)


@pytest.mark.parametrize(
    ("tools", "captured"),
    [
        ([search_corpus, multiply], 1),  # a retrieval name counts: decided without reading the content
        ([get_notes], 1),  # a list result counts: its content is looked at, never made chunks
        ([multiply], 0),  # nothing counts: not captured, as when sampled
    ],
    ids=["retrieval-name", "list-content", "calculator"],
)
def test_an_unsampled_agent_turn_never_parses_its_tool_results_into_chunks(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch, tools: list[Any], captured: int
) -> None:
    # Before, RootAccounting.finished parsed the answering prompt's tool messages into chunks (2,000 here)
    # before asking whether the root was in the sample: work on the application's thread for the ~90% of
    # turns a 10% sample leaves out. The accounting is unchanged: counted captured, then sampled_out.
    spy = ParserSpy(monkeypatch)
    rig = make_rig(sample_rate=0.0)
    named = [(t.name, ARGS[t.name]) for t in tools]
    create_react_agent(model(calls(*named), AIMessage(ANSWER)), tools).invoke(
        ask(), config={"callbacks": [rig.handler]}
    )
    rig.flush()
    stats = rig.handler.stats()
    assert (stats.captured, stats.sampled_out, spy.calls) == (captured, captured, 0)
    assert rig.judge.calls == []
    assert_accounted(rig)  # includes: no callback errors


def test_a_sampled_agent_turn_parses_its_tool_results_once(
    make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = ParserSpy(monkeypatch)  # the control for the test above: the spy sees the parser when it runs
    rig = make_rig(sample_rate=1.0)
    agent = create_react_agent(
        model(calls(("search_corpus", ARGS["search_corpus"])), AIMessage(ANSWER)), [search_corpus]
    )
    agent.invoke(ask(), config={"callbacks": [rig.handler]})
    assert judged(rig) == [MANY_PASSAGES]
    assert spy.calls == 1
    assert_accounted(rig)
